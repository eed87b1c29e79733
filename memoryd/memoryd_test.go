package memoryd_test

import (
	"strings"
	"testing"

	"github.com/codeexec/codeexec/memoryd"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  memoryd.Config
		want string // error substring; "" for valid
	}{
		{"defaults", memoryd.Config{Path: "m.db"}, ""},
		{"no path", memoryd.Config{}, "database path is empty"},
		{"negative cap", memoryd.Config{Path: "m.db", MaxValueBytes: -1}, "max value bytes is -1"},
		{"cap too large", memoryd.Config{Path: "m.db", MaxValueBytes: memoryd.MaxMaxValueBytes + 1}, "the most allowed is"},
		{"negative owner wait", memoryd.Config{Path: "m.db", OwnerWait: -1}, "owner wait is -1ns"},
		{"postgres", memoryd.Config{Store: "postgres://db.example/codeexec?target_session_attrs=read-write"}, ""},
		{"postgresql scheme", memoryd.Config{Store: "postgresql://a:5432,b:5432/codeexec"}, ""},
		{"not a postgres URL", memoryd.Config{Store: "/var/lib/codeexec/m.db"}, "the store must be a PostgreSQL URL"},
		{"key=value form", memoryd.Config{Store: "host=db dbname=codeexec"}, "postgres://"},
		{"negative store wait", memoryd.Config{Store: "postgres://db/x", StoreWait: -1}, "store wait is -1ns"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := tc.cfg
			err := cfg.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				if cfg.MaxValueBytes != memoryd.DefaultMaxValueBytes || cfg.OwnerWait != memoryd.DefaultOwnerWait {
					t.Errorf("defaults not applied: %+v", cfg)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
