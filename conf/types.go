package conf

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The value types of Config's keys beside plain strings and integers:
// each parses its text as the file, the environment and the flags give
// it (one code path for all three, viper's Unmarshal), and prints itself
// as CONFIG GET shows it, so that a value loaded back gives the same
// configuration.

// Millis is a duration written in milliseconds (max-lead-ms 5000).
type Millis struct{ time.Duration }

// Seconds is a duration written in seconds (timeout 300).
type Seconds struct{ time.Duration }

// Size is a number of bytes, written as Redis writes sizes: 1024, 64kb,
// 1mb (1k = 1000, 1kb = 1024; m, mb, g, gb alike).
type Size int

// UnmarshalText parses a whole number of milliseconds.
func (m *Millis) UnmarshalText(b []byte) error {
	return parseDuration(b, time.Millisecond, &m.Duration)
}

// String is the milliseconds, as CONFIG GET shows them.
func (m Millis) String() string { return strconv.FormatInt(m.Milliseconds(), 10) }

// UnmarshalText parses a whole number of seconds.
func (s *Seconds) UnmarshalText(b []byte) error { return parseDuration(b, time.Second, &s.Duration) }

// String is the whole seconds, as CONFIG GET shows them.
func (s Seconds) String() string { return strconv.FormatInt(int64(s.Duration/time.Second), 10) }

// UnmarshalText parses a size in bytes or with Redis's units.
func (s *Size) UnmarshalText(b []byte) error {
	n, err := parseNumber(string(b), true)
	if err == nil && int64(int(n)) != n {
		err = errors.New("out of range")
	}
	*s = Size(n)
	return err
}

// String is the bytes, without a unit, as CONFIG GET shows them.
func (s Size) String() string { return strconv.Itoa(int(s)) }

// parseDuration parses a whole number of units into d. Validate checks
// the ranges; this only keeps the number from overflowing on its way.
func parseDuration(b []byte, unit time.Duration, d *time.Duration) error {
	n, err := parseNumber(string(b), false)
	if err != nil {
		return err
	}
	if n > int64(1<<63-1)/int64(unit) || n < -int64(1<<63-1)/int64(unit) {
		return errors.New("out of range")
	}
	*d = time.Duration(n) * unit
	return nil
}

// parseNumber parses a decimal integer; with memory set it also takes
// Redis's units (1k = 1000, 1kb = 1024, and m, mb, g, gb alike).
func parseNumber(s string, memory bool) (int64, error) {
	mult := int64(1)
	if memory {
		lower := strings.ToLower(s)
		for _, u := range []struct {
			suffix string
			mult   int64
		}{{"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30}, {"k", 1e3}, {"m", 1e6}, {"g", 1e9}, {"b", 1}} {
			if strings.HasSuffix(lower, u.suffix) {
				s, mult = s[:len(s)-len(u.suffix)], u.mult
				break
			}
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		if memory {
			return 0, errors.New("not a size (bytes, or a number with k, kb, m, mb, g or gb)")
		}
		return 0, errors.New("not an integer")
	}
	if n > (1<<63-1)/mult || n < -(1<<63-1)/mult {
		return 0, errors.New("out of range")
	}
	return n * mult, nil
}

// Choices: keys whose value is one of a few words. Each is an integer
// type whose values index its names, parsed exactly (as Redis parses its
// own, and as before: "yes", not "Yes").

// YesNo is yes or no.
type YesNo int

// The values of a YesNo.
const (
	Yes YesNo = iota
	No
)

// TLSAuth is tls-auth-clients: whether TLS clients must present a
// certificate.
type TLSAuth int

// The values of tls-auth-clients.
const (
	TLSAuthYes      TLSAuth = iota // required, and checked
	TLSAuthNo                      // not asked for
	TLSAuthOptional                // checked if presented
)

// GetIDReply is getid-reply: the type of GETID's reply.
type GetIDReply int

// The values of getid-reply.
const (
	GetIDAuto GetIDReply = iota
	GetIDInteger
	GetIDString
)

// DebugCommand is enable-debug-command: who may run DEBUG and SHUTDOWN.
type DebugCommand int

// The values of enable-debug-command.
const (
	DebugNo DebugCommand = iota
	DebugYes
	DebugLocal // loopback clients only
)

// LogLevel is loglevel, in Redis's names.
type LogLevel int

// The values of loglevel.
const (
	LogDebug LogLevel = iota
	LogVerbose
	LogNotice
	LogWarning
)

var (
	yesNoNames   = []string{"yes", "no"}
	tlsAuthNames = []string{"yes", "no", "optional"}
	replyNames   = []string{"auto", "integer", "string"}
	debugNames   = []string{"no", "yes", "local"}
	levelNames   = []string{"debug", "verbose", "notice", "warning"}
)

// UnmarshalText parses yes or no.
func (v *YesNo) UnmarshalText(b []byte) error { return parseChoice(b, yesNoNames, v) }

// String is yes or no.
func (v YesNo) String() string { return yesNoNames[v] }

// UnmarshalText parses yes, no or optional.
func (v *TLSAuth) UnmarshalText(b []byte) error { return parseChoice(b, tlsAuthNames, v) }

// String is yes, no or optional.
func (v TLSAuth) String() string { return tlsAuthNames[v] }

// UnmarshalText parses auto, integer or string.
func (v *GetIDReply) UnmarshalText(b []byte) error { return parseChoice(b, replyNames, v) }

// String is auto, integer or string.
func (v GetIDReply) String() string { return replyNames[v] }

// UnmarshalText parses no, yes or local.
func (v *DebugCommand) UnmarshalText(b []byte) error { return parseChoice(b, debugNames, v) }

// String is no, yes or local.
func (v DebugCommand) String() string { return debugNames[v] }

// UnmarshalText parses Redis's level names: debug, verbose, notice or
// warning.
func (v *LogLevel) UnmarshalText(b []byte) error { return parseChoice(b, levelNames, v) }

// String is the level's Redis name.
func (v LogLevel) String() string { return levelNames[v] }

// choices lists the names of each choice type, for --help.
var choices = map[string][]string{
	"YesNo": yesNoNames, "TLSAuth": tlsAuthNames, "GetIDReply": replyNames, "DebugCommand": debugNames, "LogLevel": levelNames,
}

// parseChoice sets v to the index of text in names.
func parseChoice[T ~int](text []byte, names []string, v *T) error {
	i := slices.Index(names, string(text))
	if i < 0 {
		return fmt.Errorf("must be one of %s", strings.Join(names, ", "))
	}
	*v = T(i)
	return nil
}
