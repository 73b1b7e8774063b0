package main

import (
	"fmt"
	"strings"
	"unicode"

	"github.com/ringchat/ringchat/internal/client"
)

const helpText = `  /join GROUP        join a group
  /leave GROUP       leave a group
  /msg USER TEXT     send TEXT to USER (/msg #GROUP TEXT sends to a group)
  /g GROUP TEXT      send TEXT to GROUP
  /to USER|#GROUP    talk to USER or GROUP: plain lines go there
  /help              show this help
  /quit              leave (so does end of input)
  TEXT               send TEXT to the current conversation (//TEXT sends /TEXT)
`

// Line-mode actions.
type action int

const (
	actNone action = iota // empty line
	actJoin
	actLeave
	actSend
	actTo
	actHelp
	actQuit
)

// command is one parsed input line.
type command struct {
	act   action
	group string           // actJoin, actLeave
	to    client.Recipient // actSend, actTo (actTo with a zero To shows it)
	text  string           // actSend
	toCur bool             // actSend to the current conversation
}

// parseCommand reads one input line. Errors are for the user to read.
func parseCommand(line string) (command, error) {
	line = strings.TrimSpace(line)
	switch {
	case line == "":
		return command{act: actNone}, nil
	case strings.HasPrefix(line, "//"):
		return command{act: actSend, text: line[1:], toCur: true}, nil
	case !strings.HasPrefix(line, "/"):
		return command{act: actSend, text: line, toCur: true}, nil
	}
	name, rest := cutWord(line)
	word, text := cutWord(rest)
	switch name {
	case "/join", "/leave":
		if word == "" || text != "" {
			return command{}, fmt.Errorf("usage: %s GROUP", name)
		}
		act := actJoin
		if name == "/leave" {
			act = actLeave
		}
		return command{act: act, group: strings.TrimPrefix(word, "#")}, nil
	case "/msg", "/g":
		if word == "" || text == "" {
			if name == "/g" {
				return command{}, fmt.Errorf("usage: /g GROUP TEXT")
			}
			return command{}, fmt.Errorf("usage: /msg USER TEXT")
		}
		to, err := client.ParseRecipient(word)
		if name == "/g" {
			to, err = client.ParseRecipient("#" + strings.TrimPrefix(word, "#"))
		}
		if err != nil {
			return command{}, err
		}
		return command{act: actSend, to: to, text: text}, nil
	case "/to":
		if rest == "" {
			return command{act: actTo}, nil
		}
		to, err := client.ParseRecipient(rest)
		if err != nil {
			return command{}, fmt.Errorf("usage: /to USER or /to #GROUP")
		}
		return command{act: actTo, to: to}, nil
	case "/help", "/?":
		return command{act: actHelp}, nil
	case "/quit", "/exit":
		return command{act: actQuit}, nil
	default:
		return command{}, fmt.Errorf("unknown command %q (try /help)", name)
	}
}

// cutWord splits s at its first white space: the word, and the rest trimmed.
func cutWord(s string) (word, rest string) {
	if i := strings.IndexFunc(s, unicode.IsSpace); i >= 0 {
		return s[:i], strings.TrimSpace(s[i:])
	}
	return s, ""
}
