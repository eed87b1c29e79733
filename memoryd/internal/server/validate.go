package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"time"
	"unicode"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/codeexec/codeexec/memoryd/internal/store"
)

// DefaultTenant is the tenant of requests that name none (stdio clients).
const DefaultTenant = "default"

// tenantOf applies the default and checks the tenant name.
func tenantOf(t string) (string, error) {
	if t == "" {
		return DefaultTenant, nil
	}
	if err := checkName("tenant", t, store.MaxNameBytes); err != nil {
		return "", err
	}
	return t, nil
}

// tenantKey checks a request's tenant and memory key together.
func tenantKey(tenant, key string) (string, error) {
	t, err := tenantOf(tenant)
	if err != nil {
		return "", err
	}
	return t, checkKey(key)
}

// tenantTool checks a request's tenant and tool name together.
func tenantTool(tenant, name string) (string, error) {
	t, err := tenantOf(tenant)
	if err != nil {
		return "", err
	}
	return t, checkToolName(name)
}

// checkKey accepts any non-empty UTF-8 string of at most
// store.MaxKeyBytes bytes.
func checkKey(key string) error { return checkName("key", key, store.MaxKeyBytes) }

func checkName(what, s string, limit int) error {
	switch {
	case s == "":
		return fmt.Errorf("%w: %s is empty; use a non-empty UTF-8 string of at most %d bytes", store.ErrInvalid, what, limit)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: %s is not valid UTF-8", store.ErrInvalid, what)
	case len(s) > limit:
		return fmt.Errorf("%w: %s is %d bytes long; at most %d bytes are allowed", store.ErrInvalid, what, len(s), limit)
	}
	return nil
}

// checkToolName accepts a Python identifier of at most store.MaxNameBytes
// bytes, since the name becomes an attribute of the user_tools module.
func checkToolName(name string) error {
	if err := checkName("tool name", name, store.MaxNameBytes); err != nil {
		return err
	}
	for i, r := range name {
		ok := r == '_' || unicode.IsLetter(r) || (i > 0 && unicode.IsDigit(r))
		if !ok {
			return fmt.Errorf("%w: tool name %q is not a Python identifier (letters, digits and _, not starting with a digit)", store.ErrInvalid, name)
		}
	}
	return nil
}

// checkSize enforces the value cap, and says how to fit under it: a
// smaller value, or the flag that raises the cap (memoryd runs only as
// codeexec, whose flags these are).
func checkSize(what string, n, limit int) error {
	if n > limit {
		return fmt.Errorf("%w: %s is %d bytes; the limit is %d bytes: keep less in one (split a large value over several keys), "+
			"or raise the limit with CODEEXEC_MEMORY_MAX_VALUE (--max-value, e.g. 8m)", store.ErrTooLarge, what, n, limit)
	}
	return nil
}

// checkJSON requires exactly one JSON value and names the problem.
func checkJSON(what, text string) error {
	if text == "" {
		return fmt.Errorf("%w: %s is empty; send JSON text such as null, 0, \"text\", [] or {}", store.ErrInvalid, what)
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(text)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("%w: %s is not valid JSON: %s", store.ErrInvalid, what, describeJSONError(err, text))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: %s has extra data after its first JSON value, at byte %d; send exactly one value", store.ErrInvalid, what, dec.InputOffset())
	}
	return nil
}

// checkObject requires a JSON object; empty means {}.
func checkObject(what, text string) (string, error) {
	if text == "" {
		return "{}", nil
	}
	if err := checkJSON(what, text); err != nil {
		return "", err
	}
	if t := bytes.TrimLeft([]byte(text), " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return "", fmt.Errorf("%w: %s must be a JSON object such as {\"source\": \"notes\"}", store.ErrInvalid, what)
	}
	return text, nil
}

func describeJSONError(err error, text string) string {
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		return fmt.Sprintf("%s at byte %d", syn.Error(), syn.Offset)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return fmt.Sprintf("unexpected end of input after %d bytes", len(text))
	}
	return err.Error()
}

// The times a record can hold: the store keeps nanoseconds since 1970 in
// an int64.
var (
	earliestTime = time.Unix(0, math.MinInt64)
	latestTime   = time.Unix(0, math.MaxInt64)
)

// importTimes checks the optional create and update times of an imported
// record; zero times mean "now" to the store.
func importTimes(create, update *timestamppb.Timestamp) (created, updated time.Time, err error) {
	conv := func(what string, ts *timestamppb.Timestamp) (time.Time, error) {
		if ts == nil {
			return time.Time{}, nil
		}
		t := ts.AsTime()
		if err := ts.CheckValid(); err != nil || t.Before(earliestTime) || t.After(latestTime) {
			return time.Time{}, fmt.Errorf("%w: %s (%d seconds since 1970) is out of range; use a time between the years %d and %d", store.ErrInvalid, what, ts.GetSeconds(), earliestTime.Year()+1, latestTime.Year()-1)
		}
		return t, nil
	}
	if created, err = conv("create_time", create); err != nil {
		return
	}
	if updated, err = conv("update_time", update); err != nil {
		return
	}
	if !created.IsZero() && !updated.IsZero() && updated.Before(created) {
		err = fmt.Errorf("%w: update_time %s is before create_time %s", store.ErrInvalid, updated.Format(time.RFC3339Nano), created.Format(time.RFC3339Nano))
	}
	return
}
