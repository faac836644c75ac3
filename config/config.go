package config

import (
	"fmt"
	"maps"
	"strings"
	"time"
)

// Config holds validated values for known keys. The zero value is not
// usable; use New, Load or LoadFile. A Config may be read from several
// goroutines at once, but Set must not run concurrently with other methods.
type Config struct {
	values   map[string]value
	explicit map[string]bool
}

// New returns a Config holding the default of every key.
func New() *Config {
	return &Config{values: maps.Clone(registry.defaults), explicit: map[string]bool{}}
}

// Set validates value for key and stores it, marking the key as explicitly
// set. On failure the Config is unchanged and the *Error names the key and
// what would be valid; for an unknown key it wraps ErrUnknownKey.
func (c *Config) Set(key, value string) error {
	if e := c.set(key, value); e != nil {
		return e
	}
	return nil
}

// set is Set returning a typed nil-able *Error.
func (c *Config) set(key, text string) *Error {
	o, ok := registry.byKey[key]
	if !ok {
		return unknownKeyError(key, text)
	}
	v, reason := parseValue(o, text)
	if reason != "" {
		return &Error{Key: key, Value: text, Msg: fmt.Sprintf("invalid value %q for key %q: %s", text, key, reason)}
	}
	c.values[key] = v
	c.explicit[key] = true
	return nil
}

// IsSet reports whether key was set explicitly rather than left at its
// default. It panics if key is unknown.
func (c *Config) IsSet(key string) bool {
	mustOption(key)
	return c.explicit[key]
}

// Int returns the value of a KindInt key.
func (c *Config) Int(key string) int64 { return c.get(key, KindInt).i }

// Bool returns the value of a KindBool key.
func (c *Config) Bool(key string) bool { return c.get(key, KindBool).b }

// String returns the value of a KindString key, or the canonical spelling
// of the value of a KindEnum key.
func (c *Config) String(key string) string {
	if mustOption(key).Kind == KindEnum {
		return c.get(key, KindEnum).s
	}
	return c.get(key, KindString).s
}

// Duration returns the value of a KindDuration key.
func (c *Config) Duration(key string) time.Duration {
	return time.Duration(c.get(key, KindDuration).i)
}

// Float returns the value of a KindFloat key.
func (c *Config) Float(key string) float64 { return c.get(key, KindFloat).f }

// MemorySize returns the value of a KindMemorySize key in bytes.
func (c *Config) MemorySize(key string) int64 { return c.get(key, KindMemorySize).i }

// Explicit returns the explicitly set keys and their canonical textual
// values (e.g. "100 ms", "32 kb", "STREAMING"), for logging and for storing
// in checkpoint metadata. Each value parses back to the same value with Set.
// The map is a fresh copy.
func (c *Config) Explicit() map[string]string {
	out := make(map[string]string, len(c.explicit))
	for k := range c.explicit {
		out[k] = canonical(registry.byKey[k], c.values[k])
	}
	return out
}

// Redacted replaces the value of a sensitive key (Sensitive) wherever
// weir shows configuration: logs, the REST API.
const Redacted = "******"

// sensitiveParts are parts of key names whose values are secrets, as
// Flink's GlobalConfiguration treats them.
var sensitiveParts = []string{"password", "secret", "token", "apikey", "api-key", "auth-params", "jaas.config",
	"credential"}

// Sensitive reports whether key's value is a secret (rest.auth.token, a
// password) that must not be logged or shown.
func Sensitive(key string) bool {
	lk := strings.ToLower(key)
	for _, p := range sensitiveParts {
		if strings.Contains(lk, p) {
			return true
		}
	}
	return false
}

// ExplicitRedacted is Explicit with the values of sensitive keys replaced
// by Redacted: what may be logged.
func (c *Config) ExplicitRedacted() map[string]string {
	out := c.Explicit()
	for k := range out {
		if Sensitive(k) {
			out[k] = Redacted
		}
	}
	return out
}

// get returns the value of key, panicking if key is unknown or not of kind
// k: the getters are called by weir's own code with literal keys, so a
// mismatch is a programming error, never user input.
func (c *Config) get(key string, k Kind) value {
	o := mustOption(key)
	if o.Kind != k {
		panic(fmt.Sprintf("config: key %q is of kind %s, not %s", key, o.Kind, k))
	}
	return c.values[key]
}

func mustOption(key string) *Option {
	o, ok := registry.byKey[key]
	if !ok {
		panic(fmt.Sprintf("config: unknown configuration key %q", key))
	}
	return o
}
