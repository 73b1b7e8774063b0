// Package logging builds the zerolog loggers of the commands: readable
// console output on a terminal, JSON otherwise, one field set per process.
package logging

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
)

// Formats accepted by New.
const (
	FormatAuto    = "auto"
	FormatConsole = "console"
	FormatJSON    = "json"
)

// ErrBadOption wraps an unknown level or format.
var ErrBadOption = errors.New("logging: bad option")

// New returns a logger writing to w at the given level ("debug", "info",
// "warn", "error", ...) in the given format. FormatAuto picks console output
// when w is a terminal and JSON otherwise.
func New(w io.Writer, level, format string) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(strings.ToLower(strings.TrimSpace(level)))
	if err != nil || level == "" {
		return zerolog.Nop(), fmt.Errorf("%w: log level %q (want trace, debug, info, warn, error, fatal, panic or disabled)", ErrBadOption, level)
	}
	switch strings.ToLower(strings.TrimSpace(format)) {
	case FormatAuto, "":
		if !isTerminal(w) {
			break
		}
		fallthrough
	case FormatConsole:
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: "15:04:05.000", NoColor: !isTerminal(w)}
	case FormatJSON:
	default:
		return zerolog.Nop(), fmt.Errorf("%w: log format %q (want auto, console or json)", ErrBadOption, format)
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger(), nil
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

func init() {
	zerolog.TimeFieldFormat = time.RFC3339Nano
}
