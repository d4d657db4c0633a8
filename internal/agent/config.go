package agent

import (
	"bytes"
	"fmt"
	"github.com/wallprof/wallprof/internal/linux"
	"os"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// FileConfig is the agent's configuration file (YAML); each key is the
// flag of the same name, and flags given on the command line win.
type FileConfig struct {
	OTLP      string        `yaml:"otlp"`
	Protocol  string        `yaml:"otlp_protocol"`
	Pyroscope string        `yaml:"pyroscope"`
	Service   string        `yaml:"service"`
	Host      string        `yaml:"host"`
	PIDs      []int         `yaml:"pids"`
	Processes []string      `yaml:"processes"`
	Period    time.Duration `yaml:"period"`
	Frequency int           `yaml:"frequency"`
	Spool     string        `yaml:"spool"`
	SpoolMax  int64         `yaml:"spool_max"`
	Metrics   *string       `yaml:"metrics"`
	CA        string        `yaml:"ca"`
	TokenFile string        `yaml:"token_file"`
	BasicAuth struct {
		User         string `yaml:"user"`
		PasswordFile string `yaml:"password_file"`
	} `yaml:"basic_auth"`
}

// LoadConfig reads the configuration file at path, after checking that
// only the user running the agent can change it (CheckFile).
func LoadConfig(path string) (*FileConfig, error) {
	if err := CheckFile(path, false); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var c FileConfig
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && err.Error() != "EOF" {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return &c, nil
}

// CheckFile refuses a file that someone other than the user running the
// agent could change: one owned by another user, or writable by every
// user. A secret (a token or a password) must not be readable by every
// user either.
func CheckFile(path string, secret bool) error {
	info, err := os.Stat(path)
	if err != nil {
		return err
	}
	owner, ok := linux.FileOwner(info)
	if !ok {
		return fmt.Errorf("%s: cannot read its owner", path)
	}
	uid := os.Geteuid()
	switch mode := info.Mode().Perm(); {
	case owner != uid:
		return fmt.Errorf("%s is owned by user %d, not by the user running the agent (%d): refusing it; chown it", path, owner, uid)
	case mode&0o002 != 0:
		return fmt.Errorf("%s is writable by every user: refusing it; chmod o-w it", path)
	case secret && mode&0o004 != 0:
		return fmt.Errorf("%s holds a secret and is readable by every user: refusing it; chmod 600 it", path)
	}
	return nil
}

// ReadSecret reads a token or password file (CheckFile first); the
// secret is its first line.
func ReadSecret(path string) (string, error) {
	if err := CheckFile(path, true); err != nil {
		return "", err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	s, _, _ := strings.Cut(string(b), "\n")
	s = strings.TrimSpace(s)
	if s == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return s, nil
}
