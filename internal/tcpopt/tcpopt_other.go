//go:build !linux

package tcpopt

import "time"

func setRTOMin(uintptr, time.Duration) error { return nil }

func getRTOMin(uintptr) (time.Duration, bool) { return 0, false }

func setUserTimeout(uintptr, time.Duration) error { return nil }

func getUserTimeout(uintptr) (time.Duration, bool) { return 0, false }
