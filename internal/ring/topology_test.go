package ring

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestOrder(t *testing.T) {
	tests := []struct {
		name         string
		succ         map[int64]int64
		want         []int64
		wantProblems int
	}{
		{"empty", nil, nil, 0},
		{"one node with itself", map[int64]int64{4: 4}, []int64{4}, 0},
		{"reference join order", map[int64]int64{1: 3, 2: 1, 3: 4, 4: 6, 5: 7, 6: 8, 7: 2, 8: 5}, []int64{1, 3, 4, 6, 8, 5, 7, 2}, 0},
		{"dangling successor", map[int64]int64{1: 2, 2: 9}, []int64{1, 2}, 1},
		{"two rings", map[int64]int64{1: 2, 2: 1, 3: 4, 4: 3}, []int64{1, 2}, 1},
		{"tail into a cycle", map[int64]int64{1: 2, 2: 3, 3: 2}, []int64{1, 2, 3}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, problems := Order(tc.succ)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("order (-want +got):\n%s", diff)
			}
			if len(problems) != tc.wantProblems {
				t.Errorf("problems = %q, want %d", problems, tc.wantProblems)
			}
		})
	}
}
