package tcpopt

import (
	"time"

	"golang.org/x/sys/unix"
)

func setRTOMin(fd uintptr, d time.Duration) error {
	return unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_RTO_MIN_US, int(d.Microseconds()))
}

func getRTOMin(fd uintptr) (time.Duration, bool) {
	us, err := unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_RTO_MIN_US)
	if err != nil {
		return 0, false
	}
	return time.Duration(us) * time.Microsecond, true
}

func setUserTimeout(fd uintptr, d time.Duration) error {
	return unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(d.Milliseconds()))
}

func getUserTimeout(fd uintptr) (time.Duration, bool) {
	ms, err := unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT)
	if err != nil {
		return 0, false
	}
	return time.Duration(ms) * time.Millisecond, true
}
