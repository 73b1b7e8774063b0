package store_test

import (
	"path/filepath"
	"testing"

	"github.com/ringchat/ringchat/internal/store/storetest"
	"github.com/ringchat/ringchat/internal/testutil"
)

func TestSQLiteConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) string {
		return "sqlite:" + filepath.Join(t.TempDir(), "ringchat.db")
	})
}

func TestMariaDBConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) string {
		return testutil.MySQLDSN(t)
	})
}
