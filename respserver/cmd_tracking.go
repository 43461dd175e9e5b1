package respserver

import (
	"slices"
	"strings"

	"github.com/idserver/idserver/internal/replyerr"
)

// tracking is a client's CLIENT TRACKING state. idserver has no keys, so
// no invalidation message is ever due; the state is kept so that the
// replies, CLIENT TRACKINGINFO and CLIENT CACHING are Redis's.
type tracking struct {
	on                   bool
	bcast, optin, optout bool
	noloop               bool
	redirect             int64
	prefixes             []string
	caching              string // "yes" or "no" after CLIENT CACHING, for the next command
}

// cmdClientTracking is CLIENT TRACKING ON|OFF [REDIRECT id] [PREFIX p ...]
// [BCAST] [OPTIN] [OPTOUT] [NOLOOP], checked as Redis checks it.
func cmdClientTracking(s *Server, c *client, args [][]byte) error {
	t, err := s.parseTracking(args)
	if err != nil {
		return err
	}
	switch keyword(args[2]) {
	case "on":
		if err := c.track.compatible(t); err != nil {
			return err
		}
		if t.bcast {
			prefixes, err := c.track.addPrefixes(t.prefixes)
			if err != nil {
				return err
			}
			t.prefixes = prefixes
		}
		t.on = true
		c.track = t
	case "off":
		c.track = tracking{}
	default:
		return errSyntax
	}
	c.refreshShown()
	c.writeString("OK")
	return nil
}

func (s *Server) parseTracking(args [][]byte) (tracking, error) {
	var t tracking
	for j := 3; j < len(args); j++ {
		more := j+1 < len(args)
		switch opt := keyword(args[j]); {
		case opt == "redirect" && more:
			j++
			if t.redirect != 0 {
				return t, replyerr.New(replyerr.ERR, "A client can only redirect to a single other client")
			}
			id, ok := parseInt(args[j])
			if !ok {
				return t, errNotInteger
			}
			if !s.clientExists(id) {
				return t, replyerr.New(replyerr.ERR, "The client ID you want redirect to does not exist")
			}
			t.redirect = id
		case opt == "bcast":
			t.bcast = true
		case opt == "optin":
			t.optin = true
		case opt == "optout":
			t.optout = true
		case opt == "noloop":
			t.noloop = true
		case opt == "prefix" && more:
			j++
			t.prefixes = append(t.prefixes, string(args[j]))
		default:
			return t, errSyntax
		}
	}
	return t, nil
}

// compatible checks new options against each other and against the
// tracking already on, with Redis's errors.
func (old tracking) compatible(t tracking) error {
	switch {
	case !t.bcast && len(t.prefixes) > 0:
		return replyerr.New(replyerr.ERR, "PREFIX option requires BCAST mode to be enabled")
	case old.on && old.bcast != t.bcast:
		return replyerr.New(replyerr.ERR, "You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.")
	case t.bcast && (t.optin || t.optout):
		return replyerr.New(replyerr.ERR, "OPTIN and OPTOUT are not compatible with BCAST")
	case t.optin && t.optout:
		return replyerr.New(replyerr.ERR, "You can't specify both OPTIN mode and OPTOUT mode")
	case old.on && (t.optin && old.optout || t.optout && old.optin):
		return replyerr.New(replyerr.ERR, "You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.")
	}
	return nil
}

// addPrefixes returns the BCAST prefixes with those of a new TRACKING ON
// added, as Redis keeps them: in byte order, "" for none given (every
// key), refusing a prefix given that overlaps another (one begins the
// other: both would announce the same keys), the ones already on first.
// (Redis 7.0 also sends OK after its error for an overlap between the
// second new prefix and a later one; idserver replies once.)
func (old tracking) addPrefixes(added []string) ([]string, error) {
	var on []string
	if old.on && old.bcast {
		on = old.prefixes
	}
	for i, p := range added {
		for _, o := range on {
			if overlap(p, o) {
				return nil, replyerr.Errorf("Prefix '%s' overlaps with an existing prefix '%s'. Prefixes for a single client must not overlap.", p, o)
			}
		}
		for _, q := range added[i+1:] {
			if overlap(p, q) {
				return nil, replyerr.Errorf("Prefix '%s' overlaps with another provided prefix '%s'. Prefixes for a single client must not overlap.", p, q)
			}
		}
	}
	if len(added) == 0 { // unchecked, as in Redis: "" is every key
		added = []string{""}
	}
	all := slices.Concat(on, added)
	slices.Sort(all)
	return slices.Compact(all), nil
}

// overlap reports whether one of a and b begins the other.
func overlap(a, b string) bool { return strings.HasPrefix(a, b) || strings.HasPrefix(b, a) }

func (s *Server) clientExists(id int64) bool {
	for _, c := range s.conns.Conns() {
		if c.ID() == id {
			return true
		}
	}
	return false
}

// cmdClientCaching is CLIENT CACHING YES|NO, valid in OPTIN and OPTOUT
// tracking modes.
func cmdClientCaching(s *Server, c *client, args [][]byte) error {
	if !c.track.on {
		return replyerr.New(replyerr.ERR, "CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled")
	}
	switch opt := keyword(args[2]); {
	case opt == "yes" && c.track.optin, opt == "no" && c.track.optout:
		c.track.caching = opt
	case opt == "yes":
		return replyerr.New(replyerr.ERR, "CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.")
	case opt == "no":
		return replyerr.New(replyerr.ERR, "CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.")
	default:
		return errSyntax
	}
	c.writeString("OK")
	return nil
}

func cmdClientGetRedir(s *Server, c *client, args [][]byte) error {
	if !c.track.on {
		c.writeInt(-1)
	} else {
		c.writeInt64(c.track.redirect)
	}
	return nil
}

// cmdClientTrackingInfo is Redis's map of flags, redirect and prefixes.
func cmdClientTrackingInfo(s *Server, c *client, args [][]byte) error {
	t := c.track
	var flags []string
	if !t.on {
		flags = append(flags, "off")
	} else {
		flags = append(flags, "on")
		for _, f := range []struct {
			set  bool
			name string
		}{{t.bcast, "bcast"}, {t.optin, "optin"}, {t.optout, "optout"}, {t.caching == "yes", "caching-yes"}, {t.caching == "no", "caching-no"}, {t.noloop, "noloop"}} {
			if f.set {
				flags = append(flags, f.name)
			}
		}
	}
	c.writeMap(3)
	c.writeBulkString("flags")
	c.writeSet(len(flags))
	for _, f := range flags {
		c.writeBulkString(f)
	}
	c.writeBulkString("redirect")
	if !t.on {
		c.writeInt(-1)
	} else {
		c.writeInt64(t.redirect)
	}
	c.writeBulkString("prefixes")
	c.writeArray(len(t.prefixes))
	for _, p := range t.prefixes {
		c.writeBulkString(p)
	}
	return nil
}
