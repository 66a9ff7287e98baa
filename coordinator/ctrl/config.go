package ctrl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// MaxDuration bounds every duration of the config file. A Job's activeDeadlineSeconds is the
// sum of several of them (watchDuration + armedMaxWait + deadlineMargin; a probe Job's run, its
// timeouts and its scale chain): unbounded, a sum of huge values overflows time.Duration and
// turns into a negative deadline or a 1 ms probe interval. A year is far above any sane value.
const MaxDuration = 365 * 24 * time.Hour

// PathKey is a map key as it appears in a field path: as it is when it is plain, quoted when it
// holds spaces, quotes or control characters, so that a problem stays on one line and its
// field is recognisable.
func PathKey(k string) string {
	if k == "" || strings.IndexFunc(k, func(r rune) bool { return !unicode.IsPrint(r) || unicode.IsSpace(r) || r == '"' }) >= 0 {
		return strconv.Quote(k)
	}
	return k
}

// StrictJSON decodes raw into into, refusing unknown fields.
func StrictJSON(raw json.RawMessage, into any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(into)
}

// CleanJSONError turns encoding/json's messages into ones about the config file.
func CleanJSONError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			return fmt.Sprintf("field %s: a %s cannot be a %s", te.Field, te.Value, te.Type)
		}
		return fmt.Sprintf("a %s cannot be a %s", te.Value, te.Type)
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}
