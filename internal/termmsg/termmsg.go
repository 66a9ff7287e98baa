// Package termmsg is the one format of a run's report in its container's termination message,
// the one place a Job's pod hands the coordinator what it did: the weeder's (package reaper)
// and the probe's (package probe) alike. A message is the run's summary line, for a person
// (`kubectl describe pod`), then its report line, for the coordinator:
//
//	<summary>
//	report: <the report's JSON, or "gz85:" and the Ascii85 of its gzip when plain would not fit>
package termmsg

import (
	"bytes"
	"compress/gzip"
	"encoding/ascii85"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
)

// MaxBytes is what the kubelet keeps of a container's termination message (4 KiB): a report
// written there must fit, or its reader would get a truncated, unreadable one.
const MaxBytes = 4096

const (
	// reportLine starts the line that holds the report.
	reportLine = "report: "
	// Compressed starts a compressed report: not '{', so neither form is mistaken for the other.
	Compressed = "gz85:"
	// maxReportBytes bounds what a compressed report may inflate to: a probe shard of 200
	// namespaces of the longest names is under 20 KB of JSON; far more is a gzip bomb.
	maxReportBytes = 256 << 10
)

// Message is a run's termination message: summary (one line), then the report line with
// report's JSON, gzipped and Ascii85-encoded behind Compressed when the plain message would be
// longer than MaxBytes. Ascii85, not base64: its 25 % overhead against 33 % fits a probe
// shard of 200 random Gardener names, all healthy (about 3,930 bytes, 7 KiB plain).
func Message(summary string, report any) string {
	b, err := json.Marshal(report)
	if err != nil { // the reports are strings, numbers and maps of them: cannot happen
		return summary
	}
	if plain := summary + "\n" + reportLine + string(b); len(plain) <= MaxBytes {
		return plain
	}
	var z bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&z, gzip.BestCompression) // a valid level: cannot fail
	_, _ = zw.Write(b)                                     // into memory: cannot fail
	_ = zw.Close()
	out := make([]byte, ascii85.MaxEncodedLen(z.Len()))
	return summary + "\n" + reportLine + Compressed + string(out[:ascii85.Encode(out, z.Bytes())])
}

// ErrNoReport: the message holds no report (a run that refused its configuration, or a
// container killed before it wrote one).
var ErrNoReport = errors.New("no report in the termination message")

// ReadReport decodes the report of a message Message wrote into into (json.Unmarshal). A
// message without a report line whose whole text is a report is read as one: how probe runs
// of before the one format wrote theirs (their JSON, or Compressed and its Ascii85), so that
// the pods that ended before an upgrade are still read.
func ReadReport(msg string, into any) error {
	data, found := "", false
	for line := range strings.SplitSeq(msg, "\n") {
		if data, found = strings.CutPrefix(strings.TrimSpace(line), reportLine); found {
			break
		}
	}
	if !found {
		data = strings.TrimSpace(msg)
		if !strings.HasPrefix(data, Compressed) && !strings.HasPrefix(data, "{") {
			return ErrNoReport
		}
	}
	b := []byte(data)
	if rest, ok := strings.CutPrefix(data, Compressed); ok {
		var err error
		if b, err = uncompress(rest); err != nil {
			return fmt.Errorf("reading the report: %w", err)
		}
	}
	if err := json.Unmarshal(b, into); err != nil {
		return fmt.Errorf("reading the report %.120q: %w", b, err)
	}
	return nil
}

// uncompress is Message's compression's inverse: at most maxReportBytes, however much the
// message claims to inflate to.
func uncompress(a85 string) ([]byte, error) {
	zr, err := gzip.NewReader(ascii85.NewDecoder(strings.NewReader(a85)))
	if err != nil {
		return nil, fmt.Errorf("reading the gzip header after %q: %w", Compressed, err)
	}
	b, err := io.ReadAll(io.LimitReader(zr, maxReportBytes+1))
	if err != nil {
		return nil, fmt.Errorf("uncompressing: %w", err)
	}
	if len(b) > maxReportBytes {
		return nil, fmt.Errorf("it uncompresses to more than %d bytes", maxReportBytes)
	}
	return b, nil
}

// Fit is encode(k) for the fewest k in [0, total] parts left out (the least needed first, as
// the caller orders them) that is at most MaxBytes long; encode(total) when none is. It
// assumes a message shrinks, near enough, as parts are left out: it searches for that k, then
// makes sure of it, trying later ones in turn. A message that fits whole is encoded once.
func Fit(total int, encode func(leftOut int) string) string {
	if m := encode(0); len(m) <= MaxBytes {
		return m
	}
	for k := sort.Search(total, func(k int) bool { return len(encode(k)) <= MaxBytes }); k < total; k++ {
		if m := encode(k); len(m) <= MaxBytes {
			return m
		}
	}
	return encode(total)
}
