// Package redisinfo reads the text of an INFO reply, for the tests: the
// one parser of "# Section" headers and "name:value" lines, whatever
// client fetched the text (redis-cli's output, with \n line ends, too).
package redisinfo

import "strings"

// Field is one line of INFO: its section, name and value.
type Field struct {
	Section, Name, Value string // the section in lower case, as INFO takes it
}

// Parse returns INFO's fields, in order.
func Parse(text string) []Field {
	var fields []Field
	section := ""
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSuffix(line, "\r")
		if name, ok := strings.CutPrefix(line, "# "); ok {
			section = strings.ToLower(name)
			continue
		}
		if name, value, ok := strings.Cut(line, ":"); ok {
			fields = append(fields, Field{section, name, value})
		}
	}
	return fields
}

// Get returns the value of the field name, and whether INFO has it.
func Get(text, name string) (string, bool) {
	for _, f := range Parse(text) {
		if f.Name == name {
			return f.Value, true
		}
	}
	return "", false
}
