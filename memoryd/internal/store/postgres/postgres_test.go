package postgres

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/codeexec/codeexec/services/grpctls/grpctlstest"
	"github.com/codeexec/codeexec/services/pgtest"

	"github.com/codeexec/codeexec/memoryd/internal/store"
	"github.com/codeexec/codeexec/memoryd/internal/store/bolt"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// openPostgres opens a store on a new database of the test binary's
// PostgreSQL server.
func openPostgres(t testing.TB, now func() time.Time) *Store {
	t.Helper()
	s, err := Open(t.Context(), pgtest.NewDatabase(t), Options{Now: now, Wait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// Eight processes' worth of stores open one new database at once: the
// advisory lock lets one create the schema, the others find it done, and
// the schema table records each migration once.
func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := Open(t.Context(), url, Options{Wait: 10 * time.Second})
			if err == nil {
				_, err = s.Put(t.Context(), "t", store.KindMemory, fmt.Sprint(i), store.Write{Value: []byte("1")})
				_ = s.Close()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	var n, top int
	if err := conn.QueryRow(t.Context(), "SELECT count(*), max(version) FROM codeexec_schema").Scan(&n, &top); err != nil {
		t.Fatal(err)
	}
	if n != SchemaVersion() || top != SchemaVersion() {
		t.Errorf("codeexec_schema has %d rows up to version %d; want %d", n, top, SchemaVersion())
	}
	// A database migrated by a newer codeexec is refused, not misread.
	if _, err := conn.Exec(t.Context(), "INSERT INTO codeexec_schema (version, name, by) VALUES (99, '0099_future.sql', 'codeexec 9')"); err != nil {
		t.Fatal(err)
	}
	_, err = Open(t.Context(), url, Options{Wait: time.Second})
	if err == nil || !strings.Contains(err.Error(), "schema is at version 99") || !strings.Contains(err.Error(), "upgrade codeexec") {
		t.Errorf("open of a newer schema: %v", err)
	}
}

// A value at the suite's largest (half of its 64 MiB gRPC message) round
// trips byte for byte; session checkpoints are that large at most.
func TestPostgresLargeValue(t *testing.T) {
	t.Parallel()
	s := openPostgres(t, nil)
	big := bytes.Repeat([]byte{0, 1, 2, 0xff}, 8<<20) // 32 MiB, binary
	if _, err := s.Put(t.Context(), "t", "checkpoints", "session-1", store.Write{Value: big, Meta: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(t.Context(), "t", "checkpoints", "session-1")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Value, big) || got.ValueLen != len(big) {
		t.Errorf("32 MiB value came back as %d bytes (ValueLen %d)", len(got.Value), got.ValueLen)
	}
	list, err := s.List(t.Context(), "t", "checkpoints", false)
	if err != nil || len(list) != 1 || list[0].Value != nil || list[0].ValueLen != len(big) {
		t.Errorf("List without values: %+v, %v", list, err)
	}
}

// Outcomes older than the retention are swept; fresh ones stay.
func TestPostgresSweep(t *testing.T) {
	t.Parallel()
	s := openPostgres(t, nil)
	id := store.NewRequestID(time.Now())
	if _, err := s.Put(t.Context(), "t", store.KindMemory, "k", store.Write{Value: []byte("1"), RequestID: id}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.sweep(t.Context(), time.Hour); err != nil || n != 0 {
		t.Fatalf("sweep of fresh outcomes removed %d (%v)", n, err)
	}
	time.Sleep(10 * time.Millisecond)
	if n, err := s.sweep(t.Context(), time.Millisecond); err != nil || n != 1 {
		t.Fatalf("sweep of old outcomes removed %d (%v), want 1", n, err)
	}
	// Once swept, the ID is free again: a write with it is a new write.
	rec, err := s.Put(t.Context(), "t", store.KindMemory, "k", store.Write{Value: []byte("2"), RequestID: id})
	if err != nil || rec.Revision != 2 {
		t.Errorf("write after the sweep: %+v, %v", rec, err)
	}
}

// A PostgreSQL backup is a bbolt file that memoryd opens as its --db.
func TestPostgresBackupIsABoltFile(t *testing.T) {
	t.Parallel()
	pg := openPostgres(t, nil)
	now := time.Now()
	var entries []store.Entry // more than one batch of the backup's copy
	for i := range 3000 {
		entries = append(entries, store.Entry{Tenant: "t", Kind: store.KindMemory, Record: store.Record{
			Key: fmt.Sprintf("k%05d", i), Value: []byte(fmt.Sprint(i)), Meta: []byte("{}"), Created: now, Updated: now, Revision: 1,
		}})
	}
	if _, err := pg.Import(t.Context(), entries, false); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	n, err := pg.Backup(t.Context(), &buf)
	if err != nil || n != int64(buf.Len()) {
		t.Fatalf("Backup: %d, %v (buffer %d)", n, err, buf.Len())
	}
	path := filepath.Join(t.TempDir(), "backup.db")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	list, err := b.List(t.Context(), "t", store.KindMemory, true)
	if err != nil || len(list) != 3000 || string(list[2999].Value) != "2999" {
		t.Fatalf("backup holds %d records (%v)", len(list), err)
	}
}

// Credentials come from a password file, read for each new connection,
// and TLS is set up through the URL: verify-full against the server's CA.
func TestPostgresPasswordFileAndTLS(t *testing.T) {
	t.Parallel()
	ca := grpctlstest.NewCA(t, "pg")
	cert := ca.Issue(t, "server")
	certPEM, _ := os.ReadFile(cert.CertFile)
	keyPEM, _ := os.ReadFile(cert.KeyFile)
	srv := pgtest.Start(t, pgtest.Options{
		Conf:  []string{"ssl = on", "ssl_cert_file = 'server.pem'", "ssl_key_file = 'server-key.pem'", "password_encryption = 'scram-sha-256'"},
		HBA:   []string{"hostssl all app 127.0.0.1/32 scram-sha-256", "host all app 127.0.0.1/32 reject"},
		Files: map[string][]byte{"server.pem": certPEM, "server-key.pem": keyPEM},
	})
	if err := srv.Exec(t.Context(), "postgres", "CREATE ROLE app LOGIN PASSWORD 's3cret'", "CREATE DATABASE app OWNER app"); err != nil {
		t.Fatal(err)
	}
	base := fmt.Sprintf("postgres://app@localhost:%d/app", srv.Port)
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tlsURL := base + "?sslmode=verify-full&sslrootcert=" + ca.CAFile
	s, err := Open(t.Context(), tlsURL, Options{PasswordFile: pwFile, Wait: 5 * time.Second})
	if err != nil {
		t.Fatalf("TLS with a password file: %v", err)
	}
	if _, err := s.Put(t.Context(), "t", store.KindMemory, "k", store.Write{Value: []byte("1")}); err != nil {
		t.Fatal(err)
	}
	var ssl bool
	if err := s.pool.QueryRow(t.Context(), "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").Scan(&ssl); err != nil || !ssl {
		t.Errorf("the connection is not encrypted: %v %v", ssl, err)
	}
	_ = s.Close()

	began := time.Now()
	for _, c := range []struct {
		name, url, pwFile, want string
	}{
		{"wrong password", tlsURL, writeFile(t, "wrong"), "password authentication failed"},
		{"plaintext refused", base + "?sslmode=disable", pwFile, "pg_hba.conf rejects connection"},
		{"untrusted CA", base + "?sslmode=verify-full", pwFile, "certificate"},
		{"empty password file", tlsURL, writeFile(t, ""), "is empty"},
	} {
		_, err := Open(t.Context(), c.url, Options{PasswordFile: c.pwFile, Wait: 20 * time.Second})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.name, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: the error shows the password: %v", c.name, err)
		}
	}
	// Refusals are final: none of them waited out the 20 s.
	if d := time.Since(began); d > 15*time.Second {
		t.Errorf("refused connections took %s: they were retried as if the database were down", d)
	}
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
