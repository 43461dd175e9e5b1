package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idserver/idserver/internal/redisinfo"
)

// The one way these tests read a server's INFO: readInfo, through a
// go-redis client or a connection already open (rawInfo). processInfo,
// clusterInfo and infoField are readInfo for one field.

// serverInfo is a server's INFO as read once: its fields, in order, and
// the text they were parsed from, for a failure to show.
type serverInfo struct {
	text   string
	fields []redisinfo.Field
}

// get is the value of the field name, and whether INFO has it.
func (i serverInfo) get(name string) (string, bool) {
	for _, f := range i.fields {
		if f.Name == name {
			return f.Value, true
		}
	}
	return "", false
}

// infoSource is what INFO is read through: a *redis.Client, or rawInfo.
type infoSource interface {
	Info(ctx context.Context, sections ...string) *redis.StringCmd
}

// readInfo reads INFO's sections (INFO's default ones if none) through c
// and parses it.
func readInfo(c infoSource, sections ...string) (serverInfo, error) {
	text, err := c.Info(context.Background(), sections...).Result()
	if err != nil {
		return serverInfo{}, err
	}
	return serverInfo{text: text, fields: redisinfo.Parse(text)}, nil
}

// mustReadInfo is readInfo, failing t if INFO cannot be read.
func mustReadInfo(t *testing.T, c infoSource, sections ...string) serverInfo {
	t.Helper()
	info, err := readInfo(c, sections...)
	if err != nil {
		t.Fatalf("INFO %s: %v", strings.Join(sections, " "), err)
	}
	return info
}

// rawInfo reads INFO on a connection already open (RESP2, no HELLO), c
// and its reader r: for a server that accepts no other, out of file
// descriptors.
type rawInfo struct {
	c net.Conn
	r *bufio.Reader
}

// Info sends INFO sections inline and reads its bulk string reply.
func (ri rawInfo) Info(_ context.Context, sections ...string) *redis.StringCmd {
	ri.c.SetDeadline(time.Now().Add(5 * time.Second))
	ri.c.Write([]byte(strings.Join(append([]string{"INFO"}, sections...), " ") + "\r\n"))
	head, err := ri.r.ReadString('\n')
	n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(head, "$")))
	if err == nil && n <= 0 {
		err = fmt.Errorf("not a reply of INFO: %q", head)
	}
	if err != nil {
		return redis.NewStringResult("", err)
	}
	body := make([]byte, n+2) // and its \r\n
	if _, err := io.ReadFull(ri.r, body); err != nil {
		return redis.NewStringResult("", err)
	}
	return redis.NewStringResult(string(body[:n]), nil)
}

// processInfo is the field of INFO section of p, "" if p does not answer.
func processInfo(p *process, section, field string) string {
	c := redis.NewClient(&redis.Options{Addr: p.Addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
	defer c.Close()
	info, err := readInfo(c, section)
	if err != nil {
		return ""
	}
	v, _ := info.get(field)
	return v
}

// clusterInfo is the INFO cluster field of p named field, "" if p does
// not answer.
func clusterInfo(p *process, field string) string { return processInfo(p, "cluster", field) }

// infoField reads one field of INFO on the open connection c (rawInfo),
// failing t if INFO cannot be read or has no such field.
func infoField(t *testing.T, c net.Conn, r *bufio.Reader, field string) string {
	t.Helper()
	info := mustReadInfo(t, rawInfo{c, r})
	v, ok := info.get(field)
	if !ok {
		t.Fatalf("INFO has no %s:\n%s", field, info.text)
	}
	return v
}
