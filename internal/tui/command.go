package tui

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/ringchat/ringchat/internal/client"
)

// HelpText lists the commands of an input line, for /help and --help.
const HelpText = `  /msg USER TEXT     send TEXT to USER (/msg #GROUP TEXT sends to a group)
  /g GROUP TEXT      send TEXT to GROUP
  /to USER|#GROUP    talk to USER or GROUP: plain lines go there
  /join GROUP        join a group (and talk to it)
  /private GROUP     new invite-only group; /invite USER [#GROUP]; /passwd (hidden)
  /leave GROUP       leave a group
  /who               who is online, and at which node
  /whois USER        where USER is logged in, since when, and whether away
  /names [#GROUP]    the members of GROUP (the current one), who is online or away
  /away [MESSAGE]    mark yourself away (others see MESSAGE); /away alone: back
  /groups            every group, its size, and the ones you are in
  /history [USER|#GROUP] [N]
                     the last N messages (20) of a conversation (the current one)
  /me ACTION         send "* you ACTION" to the current conversation
  /help              show this help
  /quit              leave (so does end of input)
  TEXT               send TEXT to the current conversation (//TEXT sends /TEXT)
`

// Action is what an input line asks for.
type Action int

// The actions of an input line.
const (
	ActNone    Action = iota // an empty line
	ActSend                  // send Text to To, or to the current conversation
	ActJoin                  // join Group
	ActLeave                 // leave Group
	ActTo                    // switch to To (zero: show the current conversation)
	ActWho                   // list the users online
	ActGroups                // list the groups
	ActHistory               // show the last Limit messages with To (zero: the current conversation)
	ActPrivate               // create (or join) the invite-only Group
	ActInvite                // invite User to Group (empty: the current conversation's)
	ActPasswd                // ask for a new password
	ActHelp                  // show the commands
	ActQuit                  // leave
	ActClose                 // the full-screen client: close the current tab
	ActSearch                // the full-screen client: search the current tab for Text
	ActWhois                 // tell where User is and whether away
	ActNames                 // list the members of Group (empty: the current conversation's)
	ActAway                  // mark the user away with Text (empty: back)
)

// DefaultHistory is how many messages /history shows without a count.
const DefaultHistory = 20

// Command is one parsed input line.
type Command struct {
	Act       Action
	Group     string           // ActJoin, ActLeave
	To        client.Recipient // ActSend (unless ToCurrent), ActTo, ActHistory
	Text      string           // ActSend
	ToCurrent bool             // ActSend to the current conversation
	Limit     int              // ActHistory
	User      string           // ActInvite
	Close     bool             // ActLeave: close the group's tab too (/part in the full-screen client)
}

// Parse reads one input line. Its errors are for people to read.
func Parse(line string) (Command, error) {
	line = strings.TrimSpace(line)
	switch {
	case line == "":
		return Command{Act: ActNone}, nil
	case strings.HasPrefix(line, "//"):
		return Command{Act: ActSend, Text: line[1:], ToCurrent: true}, nil
	case !strings.HasPrefix(line, "/"):
		return Command{Act: ActSend, Text: line, ToCurrent: true}, nil
	}
	name, rest := cutWord(line)
	name = strings.ToLower(name)
	word, text := cutWord(rest)
	switch name {
	case "/join", "/leave", "/part":
		if word == "" || text != "" {
			return Command{}, fmt.Errorf("usage: %s GROUP", name)
		}
		act := ActJoin
		if name != "/join" {
			act = ActLeave
		}
		return Command{Act: act, Group: strings.TrimPrefix(word, "#")}, nil
	case "/msg", "/g":
		if word == "" || text == "" {
			if name == "/g" {
				return Command{}, fmt.Errorf("usage: /g GROUP TEXT")
			}
			return Command{}, fmt.Errorf("usage: /msg USER TEXT")
		}
		to, err := client.ParseRecipient(word)
		if name == "/g" {
			to, err = client.ParseRecipient("#" + strings.TrimPrefix(word, "#"))
		}
		if err != nil {
			return Command{}, err
		}
		return Command{Act: ActSend, To: to, Text: text}, nil
	case "/to", "/query":
		if rest == "" {
			return Command{Act: ActTo}, nil
		}
		to, err := client.ParseRecipient(rest)
		if err != nil {
			return Command{}, fmt.Errorf("usage: /to USER or /to #GROUP")
		}
		return Command{Act: ActTo, To: to}, nil
	case "/private":
		if word == "" || text != "" {
			return Command{}, fmt.Errorf("usage: /private GROUP")
		}
		return Command{Act: ActPrivate, Group: strings.TrimPrefix(word, "#")}, nil
	case "/invite":
		if word == "" || strings.Contains(text, " ") || (text != "" && !strings.HasPrefix(text, "#")) {
			return Command{}, fmt.Errorf("usage: /invite USER [#GROUP]")
		}
		return Command{Act: ActInvite, User: word, Group: strings.TrimPrefix(text, "#")}, nil
	case "/passwd", "/password":
		if rest != "" {
			return Command{}, fmt.Errorf("usage: /passwd (the password is asked for on the next line, hidden)")
		}
		return Command{Act: ActPasswd}, nil
	case "/me":
		if rest == "" {
			return Command{}, fmt.Errorf("usage: /me ACTION")
		}
		return Command{Act: ActSend, Text: ActionPrefix + rest, ToCurrent: true}, nil
	case "/who":
		return Command{Act: ActWho}, nil
	case "/whois":
		if word == "" || text != "" {
			return Command{}, fmt.Errorf("usage: /whois USER")
		}
		return Command{Act: ActWhois, User: word}, nil
	case "/names":
		if text != "" {
			return Command{}, fmt.Errorf("usage: /names [#GROUP]")
		}
		return Command{Act: ActNames, Group: strings.TrimPrefix(word, "#")}, nil
	case "/away":
		return Command{Act: ActAway, Text: rest}, nil
	case "/groups":
		return Command{Act: ActGroups}, nil
	case "/history":
		return parseHistory(rest)
	case "/help", "/?":
		return Command{Act: ActHelp}, nil
	case "/quit", "/exit":
		return Command{Act: ActQuit}, nil
	default:
		return Command{}, fmt.Errorf("unknown command %q (try /help)", name)
	}
}

// parseHistory reads "[USER|#GROUP] [N]".
func parseHistory(args string) (Command, error) {
	c := Command{Act: ActHistory, Limit: DefaultHistory}
	usage := fmt.Errorf("usage: /history [USER|#GROUP] [N]")
	fields := strings.Fields(args)
	if len(fields) > 2 {
		return Command{}, usage
	}
	for i, f := range fields {
		if n, err := strconv.Atoi(f); err == nil && i == len(fields)-1 {
			if n < 1 || n > 100 {
				return Command{}, fmt.Errorf("/history: N must be 1 to 100")
			}
			c.Limit = n
			continue
		}
		if i > 0 {
			return Command{}, usage
		}
		to, err := client.ParseRecipient(f)
		if err != nil {
			return Command{}, usage
		}
		c.To = to
	}
	return c, nil
}

// cutWord splits s at its first white space: the word, and the rest trimmed.
func cutWord(s string) (word, rest string) {
	if i := strings.IndexFunc(s, unicode.IsSpace); i >= 0 {
		return s[:i], strings.TrimSpace(s[i:])
	}
	return s, ""
}
