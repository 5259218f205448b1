package broker

import (
	"crypto/rand"
	"fmt"

	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/broker/meta"
	"github.com/shoal-mq/shoal/broker/security"
)

// SCRAM credentials without a running broker, for `shoal scram` (as
// Kafka's `kafka-storage format --add-scram` makes a first
// administrator): each opens the data directory's metadata store, which
// fails while a broker holds it.

// ScramCredential is one stored credential as `shoal scram list` shows it.
type ScramCredential struct {
	User, Mechanism string
	Iterations      int
}

func withCredentials(dataDir string, fn func(*security.Credentials) error) error {
	m, err := meta.Open(dataDir, zap.NewNop())
	if err != nil {
		return fmt.Errorf("open %s (is a broker running on it?): %w", dataDir, err)
	}
	creds, err := security.LoadCredentials(m)
	if err == nil {
		err = fn(creds)
	}
	if cerr := m.Close(); err == nil {
		err = cerr
	}
	return err
}

// ScramAdd stores user's credential for mechanism from password, salted
// with a fresh random salt; iterations 0 means 4096.
func ScramAdd(dataDir, mechanism, user, password string, iterations int) error {
	if iterations == 0 {
		iterations = security.MinScramIterations
	}
	if security.ScramMechanismNumber(mechanism) == 0 {
		return fmt.Errorf("mechanism %q is not SCRAM-SHA-256 or SCRAM-SHA-512", mechanism)
	}
	if password == "" {
		return fmt.Errorf("the password is empty")
	}
	salt := make([]byte, 32)
	rand.Read(salt)
	salted, err := security.SaltedPassword(mechanism, password, salt, iterations)
	if err != nil {
		return err
	}
	return withCredentials(dataDir, func(c *security.Credentials) error {
		return c.Upsert(mechanism, user, salt, salted, iterations)
	})
}

// ScramDelete removes user's credential for mechanism.
func ScramDelete(dataDir, mechanism, user string) error {
	return withCredentials(dataDir, func(c *security.Credentials) error {
		ok, err := c.Delete(mechanism, user)
		if err == nil && !ok {
			err = fmt.Errorf("user %q has no %s credential", user, mechanism)
		}
		return err
	})
}

// ScramList returns every stored credential.
func ScramList(dataDir string) ([]ScramCredential, error) {
	var out []ScramCredential
	err := withCredentials(dataDir, func(c *security.Credentials) error {
		for _, u := range c.Users() {
			for _, in := range c.Describe(u) {
				out = append(out, ScramCredential{User: u, Mechanism: in.Mechanism, Iterations: in.Iterations})
			}
		}
		return nil
	})
	return out, err
}
