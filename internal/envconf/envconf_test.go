package envconf

import (
	"math"
	"slices"
	"strings"
	"testing"
	"testing/quick"
	"time"
)

func TestProblemsQuoteTheValueInTheOneFormat(t *testing.T) {
	for _, tc := range []struct {
		name     string
		maxShown int
		value    string
		want     string
	}{
		{"whole value", 0, strings.Repeat("x", 300), `X="` + strings.Repeat("x", 300) + `": bad 1`},
		{"short value under a bound", 10, "abc", `X="abc": bad 1`},
		{"long value cut at the bound", 3, "abcdef", `X="abc...": bad 1`},
		{"cut keeps valid UTF-8", 1, "äb", `X="...": bad 1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Reader{MaxShown: tc.maxShown}
			r.Fail("X", tc.value, "bad %d", 1)
			r.Warn("X", tc.value, "bad %d", 1)
			if len(r.Problems) != 1 || r.Problems[0] != tc.want || len(r.Warnings) != 1 || r.Warnings[0] != tc.want {
				t.Errorf("problems %q warnings %q, want %q", r.Problems, r.Warnings, tc.want)
			}
		})
	}
}

func TestHasFindsProblemsOfOneVariableOnly(t *testing.T) {
	r := Reader{}
	r.Add("NAMESPACE: required, not set")
	r.Fail("RUN_DURATION", "x", "bad")
	for name, want := range map[string]bool{"NAMESPACE": true, "RUN_DURATION": true, "NAMESPACES": false, "RUN": false} {
		if got := r.Has(name); got != want {
			t.Errorf("Has(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestParsersRefuseWhatNoSettingMeans(t *testing.T) {
	for _, v := range []string{"NaN", "nan", "Inf", "-Inf", "+infinity", "1e400", "", "x"} {
		if f, ok := Float(v); ok {
			t.Errorf("Float(%q) = %v, want refused", v, f)
		}
	}
	for _, v := range []string{"yes", "", " true", "on"} {
		if _, ok := Bool(v); ok {
			t.Errorf("Bool(%q) accepted: only strconv.ParseBool's syntax, untrimmed, is", v)
		}
	}
	if d, err := Duration(" 90s "); err != nil || d != 90*time.Second {
		t.Errorf("Duration(\" 90s \") = %v, %v: spaces around it are ignored", d, err)
	}
	if n, err := Int(" 7 "); err != nil || n != 7 {
		t.Errorf("Int(\" 7 \") = %v, %v: spaces around it are ignored", n, err)
	}
}

func TestFormattersAreTheParsersInverses(t *testing.T) {
	cfg := &quick.Config{MaxCount: 2000}
	if err := quick.Check(func(b bool) bool { got, ok := Bool(FormatBool(b)); return ok && got == b }, cfg); err != nil {
		t.Error("bool:", err)
	}
	if err := quick.Check(func(n int64) bool {
		d := time.Duration(n)
		got, err := Duration(FormatDuration(d))
		return err == nil && got == d
	}, cfg); err != nil {
		t.Error("duration:", err)
	}
	if err := quick.Check(func(n int) bool { got, err := Int(FormatInt(n)); return err == nil && got == n }, cfg); err != nil {
		t.Error("int:", err)
	}
	if err := quick.Check(func(f float64) bool {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return true
		}
		got, ok := Float(FormatFloat(f))
		return ok && got == f
	}, cfg); err != nil {
		t.Error("float:", err)
	}
}

func TestWriterKeepsTheOrderOfSetting(t *testing.T) {
	var w Writer
	w.Set("B", "1")
	w.Set("A", "2")
	env := w.Env()
	if len(env) != 2 || env[0].Name != "B" || env[1].Name != "A" || env[1].Value != "2" {
		t.Errorf("env %v", env)
	}
}

// TestScheduleNamesTheVariableAndValueOfEveryScheduleItRefuses: the engines' SCHEDULE, parsed
// once; a refused one is a problem naming the variable and the value as written, never a panic.
func TestScheduleNamesTheVariableAndValueOfEveryScheduleItRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, value, spec string
		problem           string // "" = accepted
	}{
		{"a descriptor", "@every 1m", "@every 1m", ""},
		{"five fields with seconds", "*/10 * * * * *", "*/10 * * * * *", ""},
		{"not cron", "often", "often", `SCHEDULE="often": not a valid cron schedule: `},
		{"a time-zone prefix robfig/cron panics on", "TZ=UTC", "TZ=UTC", `SCHEDULE="TZ=UTC": not a valid cron schedule`},
		{"a day that never comes", "0 0 30 2 *", "0 0 30 2 *", `SCHEDULE="0 0 30 2 *": never fires`},
		{"the spec as the engine read it is parsed (the probe trims)", " @every 1m ", "@every 1m", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Reader{}
			s := r.Schedule("SCHEDULE", tc.value, tc.spec)
			switch {
			case tc.problem == "" && (s == nil || len(r.Problems) > 0):
				t.Fatalf("refused: %q", r.Problems)
			case tc.problem != "" && (s != nil || len(r.Problems) != 1 || !strings.HasPrefix(r.Problems[0], tc.problem)):
				t.Fatalf("schedule %v, problems %q, want one starting %q", s, r.Problems, tc.problem)
			}
		})
	}
}

func TestWithoutValueKeepsTheNameAlone(t *testing.T) {
	for in, want := range map[string]string{
		`SCHEDULE="hunter2": not a valid cron schedule`:              "SCHEDULE: invalid value",
		`A="with \"quotes\": and colons": must be a number`:          "A: invalid value",
		`LABEL_SELECTORS="[\"a\",\"\"]": entry 1: must not be empty`: "LABEL_SELECTORS: invalid value",
		"NAMESPACE: required, not set":                               "NAMESPACE: required, not set",
		`--kubeconfig: not accepted inside a pod`:                    `--kubeconfig: not accepted inside a pod`,
		`X="unterminated: oops`:                                      `X="unterminated: oops`,
	} {
		if got := WithoutValue(in); got != want {
			t.Errorf("WithoutValue(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestGetReadsTheEmptyValueAsItsRuleSays: the two engines' rules for a variable set to the
// empty value (or to spaces), which is all that tells their readers apart.
func TestGetReadsTheEmptyValueAsItsRuleSays(t *testing.T) {
	vars := []Var{
		{Name: "PARSED", Default: "d", Empty: EmptyParsed},
		{Name: "REFUSED", Empty: EmptyRefused},
		{Name: "REFUSED_DEFAULT", Default: "d", Empty: EmptyRefused},
		{Name: "UNSET", Default: "d", Empty: EmptyUnset},
		{Name: "REQUIRED", Required: true, Empty: EmptyUnset},
	}
	for _, tc := range []struct {
		name, value string
		set         bool
		reader      Empty
		want        string
		wantOK      bool
		wantSet     bool
		problem     string
	}{
		{"PARSED", " ", true, EmptyRefused, " ", true, true, ""},
		{"PARSED", "", false, EmptyParsed, "d", true, true, ""},
		{"REFUSED", "", true, EmptyParsed, "", false, true, `REFUSED="": must not be empty (unset it instead)`},
		{"REFUSED_DEFAULT", " ", true, EmptyParsed, "", false, true, `REFUSED_DEFAULT=" ": must not be empty (unset it to get the default "d")`},
		{"UNSET", " ", true, EmptyRefused, "d", true, true, ""},
		{"REQUIRED", "", true, EmptyParsed, "", false, false, `REQUIRED="": required, must not be empty`},
		{"REQUIRED", "", false, EmptyParsed, "", false, false, "REQUIRED: required, not set"},
		{"OTHER", "", true, EmptyRefused, "", false, true, `OTHER="": must not be empty (unset it instead)`},
		{"OTHER", "", true, EmptyUnset, "", false, false, ""},
		{"OTHER", "", true, EmptyParsed, "", true, true, ""},
	} {
		r := Reader{Vars: vars, Empty: tc.reader, Lookup: func(n string) (string, bool) { return tc.value, tc.set && n == tc.name }}
		v, ok := r.Get(tc.name)
		_, _ = r.Get(tc.name) // a problem is recorded once however often it is read
		var problems []string
		if tc.problem != "" {
			problems = []string{tc.problem}
		}
		if v != tc.want || ok != tc.wantOK || !slices.Equal(r.Problems, problems) || r.IsSet(tc.name) != tc.wantSet {
			t.Errorf("%s=%q (set %v, reader's rule %d): Get = %q, %v; IsSet %v; problems %q; want %q, %v; %v; %q",
				tc.name, tc.value, tc.set, tc.reader, v, ok, r.IsSet(tc.name), r.Problems, tc.want, tc.wantOK, tc.wantSet, problems)
		}
	}
}

func TestBoolTrimsSpacesOnlyWhenTheReaderSaysSo(t *testing.T) {
	for _, trim := range []bool{false, true} {
		r := Reader{TrimBools: trim, Lookup: func(string) (string, bool) { return " true", true }}
		if got := r.Bool("DRY_RUN"); got != trim || (len(r.Problems) == 0) != trim {
			t.Errorf("TrimBools %v: Bool = %v, problems %q", trim, got, r.Problems)
		}
	}
}
