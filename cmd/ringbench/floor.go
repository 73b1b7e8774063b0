package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"time"

	"github.com/spf13/cobra"
)

// newFloorCmd measures the floor under any hop time on this machine: a
// 64-byte line echoed over loopback TCP between two processes, with nothing
// else (no signing, no JSON, one goroutine a side).
func newFloorCmd() *cobra.Command {
	var gap time.Duration
	var rounds int
	cmd := &cobra.Command{
		Use:   "tcp-floor",
		Short: "Round trip of a bare 64-byte echo between two processes over loopback TCP",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rtts, err := echoFloor(gap, rounds)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "loopback TCP echo, %d rounds %v apart: median %v, p90 %v\n",
				rounds, gap, rtts[len(rtts)/2].Round(time.Microsecond), rtts[len(rtts)*9/10].Round(time.Microsecond))
			return nil
		},
	}
	cmd.Flags().DurationVar(&gap, "gap", 800*time.Millisecond, "pause between rounds (a node of an idle ring gets the token every 800 ms)")
	cmd.Flags().IntVar(&rounds, "rounds", 100, "round trips")
	return cmd
}

// echoFloor echoes a 64-byte line to an echo-server child process rounds
// times, gap apart, and returns the round trips sorted.
func echoFloor(gap time.Duration, rounds int) ([]time.Duration, error) {
	if rounds < 1 {
		return nil, fmt.Errorf("tcp-floor: %d rounds", rounds)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	echo := exec.Command(self, "echo-server", ln.Addr().String())
	ln.Close()
	if err := echo.Start(); err != nil {
		return nil, err
	}
	defer func() { _ = echo.Process.Kill(); _ = echo.Wait() }()
	var c net.Conn
	for range 100 {
		if c, err = net.Dial("tcp", ln.Addr().String()); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		return nil, err
	}
	defer c.Close()
	r := bufio.NewReader(c)
	line := []byte(fmt.Sprintf("%063d\n", 0))
	var rtts []time.Duration
	for range rounds {
		time.Sleep(gap)
		t := time.Now()
		if _, err := c.Write(line); err != nil {
			return nil, err
		}
		if _, err := r.ReadBytes('\n'); err != nil {
			return nil, err
		}
		rtts = append(rtts, time.Since(t))
	}
	slices.Sort(rtts)
	return rtts, nil
}

// newEchoServerCmd is the other process of tcp-floor.
func newEchoServerCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "echo-server ADDR",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			ln, err := net.Listen("tcp", args[0])
			if err != nil {
				return err
			}
			c, err := ln.Accept()
			if err != nil {
				return err
			}
			r := bufio.NewReader(c)
			for {
				l, err := r.ReadBytes('\n')
				if err != nil {
					return nil
				}
				if _, err := c.Write(l); err != nil {
					return nil
				}
			}
		},
	}
}
