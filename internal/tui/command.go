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
	parse, ok := commands[name]
	if !ok {
		return Command{}, fmt.Errorf("unknown command %q (try /help)", name)
	}
	word, text := cutWord(rest)
	return parse(cmdArgs{name: name, rest: rest, word: word, text: text})
}

// cmdArgs is what follows a command's name on an input line: rest, and
// rest cut into its first word and the text after it.
type cmdArgs struct {
	name       string // the command's name, in lower case ("/join")
	rest       string
	word, text string
}

// commands maps every command's name (and alias) to the parser of its
// arguments.
var commands = map[string]func(cmdArgs) (Command, error){
	"/join":     parseJoinLeave,
	"/leave":    parseJoinLeave,
	"/part":     parseJoinLeave,
	"/msg":      parseMsgTo,
	"/g":        parseMsgTo,
	"/to":       parseTo,
	"/query":    parseTo,
	"/private":  parsePrivate,
	"/invite":   parseInvite,
	"/passwd":   parsePasswd,
	"/password": parsePasswd,
	"/me":       parseMe,
	"/whois":    parseWhois,
	"/names":    parseNames,
	"/away":     func(a cmdArgs) (Command, error) { return Command{Act: ActAway, Text: a.rest}, nil },
	"/history":  func(a cmdArgs) (Command, error) { return parseHistory(a.rest) },
	"/who":      bare(ActWho),
	"/groups":   bare(ActGroups),
	"/help":     bare(ActHelp),
	"/?":        bare(ActHelp),
	"/quit":     bare(ActQuit),
	"/exit":     bare(ActQuit),
}

// bare is the parser of a command that takes no arguments (any are
// ignored) and asks for act.
func bare(act Action) func(cmdArgs) (Command, error) {
	return func(cmdArgs) (Command, error) { return Command{Act: act}, nil }
}

// parseJoinLeave reads "/join GROUP", "/leave GROUP" and "/part GROUP".
func parseJoinLeave(a cmdArgs) (Command, error) {
	if a.word == "" || a.text != "" {
		return Command{}, fmt.Errorf("usage: %s GROUP", a.name)
	}
	act := ActJoin
	if a.name != "/join" {
		act = ActLeave
	}
	return Command{Act: act, Group: strings.TrimPrefix(a.word, "#")}, nil
}

// parseMsgTo reads "/msg USER|#GROUP TEXT" and "/g [#]GROUP TEXT".
func parseMsgTo(a cmdArgs) (Command, error) {
	if a.word == "" || a.text == "" {
		if a.name == "/g" {
			return Command{}, fmt.Errorf("usage: /g GROUP TEXT")
		}
		return Command{}, fmt.Errorf("usage: /msg USER TEXT")
	}
	to, err := client.ParseRecipient(a.word)
	if a.name == "/g" {
		to, err = client.ParseRecipient("#" + strings.TrimPrefix(a.word, "#"))
	}
	if err != nil {
		return Command{}, err
	}
	return Command{Act: ActSend, To: to, Text: a.text}, nil
}

// parseTo reads "/to [USER|#GROUP]" (and "/query").
func parseTo(a cmdArgs) (Command, error) {
	if a.rest == "" {
		return Command{Act: ActTo}, nil
	}
	to, err := client.ParseRecipient(a.rest)
	if err != nil {
		return Command{}, fmt.Errorf("usage: /to USER or /to #GROUP")
	}
	return Command{Act: ActTo, To: to}, nil
}

// parsePrivate reads "/private GROUP".
func parsePrivate(a cmdArgs) (Command, error) {
	if a.word == "" || a.text != "" {
		return Command{}, fmt.Errorf("usage: /private GROUP")
	}
	return Command{Act: ActPrivate, Group: strings.TrimPrefix(a.word, "#")}, nil
}

// parseInvite reads "/invite USER [#GROUP]".
func parseInvite(a cmdArgs) (Command, error) {
	if a.word == "" || strings.Contains(a.text, " ") || (a.text != "" && !strings.HasPrefix(a.text, "#")) {
		return Command{}, fmt.Errorf("usage: /invite USER [#GROUP]")
	}
	return Command{Act: ActInvite, User: a.word, Group: strings.TrimPrefix(a.text, "#")}, nil
}

// parsePasswd reads "/passwd" (and "/password"), which takes no arguments.
func parsePasswd(a cmdArgs) (Command, error) {
	if a.rest != "" {
		return Command{}, fmt.Errorf("usage: /passwd (the password is asked for on the next line, hidden)")
	}
	return Command{Act: ActPasswd}, nil
}

// parseMe reads "/me ACTION": ACTION goes to the current conversation.
func parseMe(a cmdArgs) (Command, error) {
	if a.rest == "" {
		return Command{}, fmt.Errorf("usage: /me ACTION")
	}
	return Command{Act: ActSend, Text: ActionPrefix + a.rest, ToCurrent: true}, nil
}

// parseWhois reads "/whois USER".
func parseWhois(a cmdArgs) (Command, error) {
	if a.word == "" || a.text != "" {
		return Command{}, fmt.Errorf("usage: /whois USER")
	}
	return Command{Act: ActWhois, User: a.word}, nil
}

// parseNames reads "/names [#GROUP]".
func parseNames(a cmdArgs) (Command, error) {
	if a.text != "" {
		return Command{}, fmt.Errorf("usage: /names [#GROUP]")
	}
	return Command{Act: ActNames, Group: strings.TrimPrefix(a.word, "#")}, nil
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
