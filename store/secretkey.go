package store

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"dataservice/store/model"
)

// SecretKeySetting is the setting that names the key file of encrypted secrets: the
// messages of a missing or unusable key name it.
const SecretKeySetting = "SERVICE_SECRET_KEY_FILE"

// secretKeyLen is the length of the AES-256 key.
const secretKeyLen = 32

// secretKeys holds the key that seals encrypted secrets (secret fields with
// dataformat_ext encrypted): given (Options.SecretKey), or read from a file outside the
// database, which on SQLite defaults to the database's path plus ".key" and is created
// at the first write that needs it. On PostgreSQL there is no default, and a missing
// file is not created: every node must use one key, which one node making its own
// would silently break for the others.
type secretKeys struct {
	file   string // "" when no file is set and there is no default
	create bool   // a missing file may be created (SQLite)
	mu     sync.Mutex
	key    []byte // the key once known
}

// newSecretKeys is the key holder of the database at path with opts.
func newSecretKeys(path string, opts Options) (*secretKeys, error) {
	k := &secretKeys{file: opts.SecretKeyFile}
	if opts.SecretKey != nil {
		if len(opts.SecretKey) != secretKeyLen {
			return nil, fmt.Errorf("secret key: %d bytes, not %d", len(opts.SecretKey), secretKeyLen)
		}
		k.key = append([]byte(nil), opts.SecretKey...)
		return k, nil
	}
	if !isPostgresURL(path) {
		k.create = true
		if k.file == "" {
			abs, err := filepath.Abs(path)
			if err != nil {
				return nil, fmt.Errorf("secret key: %w", err)
			}
			k.file = abs + ".key"
		}
	}
	return k, nil
}

// get returns the key, reading its file the first time; a missing file is created
// when create is set and the database allows it. Its errors name the setting and the
// file, and say what to do.
func (k *secretKeys) get(create bool) ([]byte, error) {
	if k == nil {
		return nil, model.Errorf(model.EInvalid, "encrypted secrets need a key: %s is not set", SecretKeySetting)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.key != nil {
		return k.key, nil
	}
	if k.file == "" {
		return nil, model.Errorf(model.EInvalid, "encrypted secrets need a key: %s is not set (on PostgreSQL there is "+
			"no default: give every node the same file of 64 hex digits, mode 0600)", SecretKeySetting)
	}
	key, err := readKeyFile(k.file)
	if errors.Is(err, fs.ErrNotExist) {
		if !k.create {
			return nil, model.Errorf(model.EInvalid, "encrypted secrets need a key: the key file %s (%s) does not exist; "+
				"on PostgreSQL it is not created: make it once (64 hex digits, mode 0600) and give every node the same",
				k.file, SecretKeySetting)
		}
		if !create {
			return nil, errKeyMissing
		}
		key, err = createKeyFile(k.file)
	}
	if err != nil {
		return nil, err
	}
	k.key = key
	return key, nil
}

// errKeyMissing: the key file does not exist yet and may be created by the first
// write that needs it (a dry run or a read does not create it).
var errKeyMissing = errors.New("the key file does not exist yet")

// readKeyFile reads a key file: a regular file, not a symbolic link (a link lets
// whoever may change it, or its directory, swap the key), owned by the service's
// effective user or root, that neither group nor others may read or write, holding
// 64 hex digits (a final newline allowed).
func readKeyFile(path string) ([]byte, error) {
	// O_NONBLOCK: opening a FIFO put there must not wait for a writer.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, err
		case errors.Is(err, syscall.ELOOP):
			return nil, model.Errorf(model.EInvalid, "encrypted secrets need a key: the key file %s (%s) is a symbolic "+
				"link: name the file itself", path, SecretKeySetting)
		}
		return nil, model.Errorf(model.EInvalid, "encrypted secrets need a key: the key file %s (%s) cannot be read: %v",
			path, SecretKeySetting, errors.Unwrap(err))
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read key file %s: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return nil, model.Errorf(model.EInvalid, "encrypted secrets need a key: the key file %s (%s) is not a regular file",
			path, SecretKeySetting)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		if euid := os.Geteuid(); int(sys.Uid) != euid && sys.Uid != 0 {
			return nil, model.Errorf(model.EInvalid, "encrypted secrets need a key: the key file %s (%s) is owned by "+
				"uid %d, not by the service's user (uid %d) or root (chown %d %s)", path, SecretKeySetting, sys.Uid, euid,
				euid, path)
		}
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return nil, model.Errorf(model.EInvalid, "encrypted secrets need a key: the key file %s (%s) has mode %04o: "+
			"group and others must have no access (chmod 600 %s)", path, SecretKeySetting, perm, path)
	}
	b, err := io.ReadAll(io.LimitReader(f, 256))
	if err != nil {
		return nil, fmt.Errorf("read key file %s: %w", path, err)
	}
	key, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(key) != secretKeyLen {
		return nil, model.Errorf(model.EInvalid, "encrypted secrets need a key: the key file %s (%s) must hold %d hex "+
			"digits (%d bytes)", path, SecretKeySetting, 2*secretKeyLen, secretKeyLen)
	}
	return key, nil
}

// createKeyFile makes a new random key file at path, mode 0600. It is written under
// another name and linked into place, which fails when the name exists: two processes
// that create it at once end up with one key, and none reads a file half written.
func createKeyFile(path string) ([]byte, error) {
	key := make([]byte, secretKeyLen)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("create key file %s: %w", path, err)
	}
	tmp := fmt.Sprintf("%s.%s.tmp", path, hex.EncodeToString(key[:4]))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create key file %s: %w", path, err)
	}
	defer os.Remove(tmp)
	_, err = f.WriteString(hex.EncodeToString(key) + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("create key file %s: %w", path, err)
	}
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return readKeyFile(path) // another process made it first
		}
		return nil, fmt.Errorf("create key file %s: %w", path, err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync()
		d.Close()
	}
	return key, nil
}

// sealWith seals plain with key: SealedPrefix + base64(nonce || AES-256-GCM ciphertext).
func sealWith(key []byte, plain string) (string, error) {
	aead, err := newAEAD(key)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("seal secret: %w", err)
	}
	out := aead.Seal(nonce, nonce, []byte(plain), nil)
	return model.SealedPrefix + base64.StdEncoding.EncodeToString(out), nil
}

// openWith opens a sealed value with key; the error never quotes the value.
func openWith(key []byte, sealed string) ([]byte, error) {
	b64, ok := strings.CutPrefix(sealed, model.SealedPrefix)
	if !ok {
		return nil, errors.New("not a sealed value")
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, errors.New("not a sealed value (bad base64)")
	}
	aead, err := newAEAD(key)
	if err != nil {
		return nil, err
	}
	if len(raw) < aead.NonceSize()+aead.Overhead() {
		return nil, errors.New("not a sealed value (too short)")
	}
	plain, err := aead.Open(nil, raw[:aead.NonceSize()], raw[aead.NonceSize():], nil)
	if err != nil {
		return nil, errors.New("it does not open with this key (sealed with another key, or altered)")
	}
	return plain, nil
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("secret key: %w", err)
	}
	return cipher.NewGCM(block)
}

// OpenSecret opens an encrypted secret's stored value with the database's key (for
// the code that uses the secret: a webhook's signature). The error names the setting
// when there is no key, never the value.
func (db *DB) OpenSecret(sealed string) ([]byte, error) {
	key, err := db.keys.get(false)
	if errors.Is(err, errKeyMissing) {
		return nil, model.Errorf(model.EInvalid, "encrypted secret: the key file %s (%s) does not exist: "+
			"it was lost or moved since the secret was sealed; set the secret again", db.keys.file, SecretKeySetting)
	}
	if err != nil {
		return nil, err
	}
	plain, err := openWith(key, sealed)
	if err != nil {
		return nil, model.Errorf(model.EInvalid, "encrypted secret: %v; set the secret again (docs/events.md, The signing key)", err)
	}
	return plain, nil
}

// sealSecrets seals, in next, every encrypted secret's value that is new plain text
// (a value kept from old stays as stored): the one place a plain secret becomes its
// stored form, on the apply path every write goes through. A value given already
// sealed is refused unless it is the one this instance's field holds (a no-op): any
// other is another instance's, and no caller may borrow its secret. A dry run
// checks that there is a key but creates no key file: it seals with a key of its own
// when the file is still to be made (what it writes is discarded).
func (tx *Tx) sealSecrets(s *model.Schema, old, next *Instance, dryRun bool) (sealed bool, err error) {
	var probs model.Problems
	for _, f := range s.Fields {
		if !f.IsEncryptedSecret() {
			continue
		}
		v, ok := next.Data[f.Keyname].(string)
		if !ok || v == "" {
			continue
		}
		if old != nil {
			if ov, _ := old.Data[f.Keyname].(string); ov == v {
				continue
			}
		}
		var err error
		if strings.HasPrefix(v, model.SealedPrefix) {
			// Not the value this field holds (kept above): secrets are never shown, so
			// a sealed text given is another instance's (from a backup, a copy), which
			// would make this one sign with a secret its writer never knew.
			err = model.Errorf(model.EInvalid, "the sealed value given (%s...) cannot be used: a field keeps only its own "+
				"sealed value as is; give the secret itself (a value starting with %s is taken as sealed)",
				model.SealedPrefix, model.SealedPrefix)
		} else {
			dry := dryRun || tx.dry != nil
			var key []byte
			key, err = tx.db.keys.get(!dry)
			if dry && errors.Is(err, errKeyMissing) {
				key, err = make([]byte, secretKeyLen), nil
				rand.Read(key)
			}
			if err == nil {
				var text string
				if text, err = sealWith(key, v); err == nil {
					next.Data[f.Keyname], sealed = text, true
				}
			}
		}
		if err != nil {
			if !model.HasCode(err, model.EInvalid) {
				return false, err
			}
			if perr := probs.Add(f.Keyname, model.Errorf(model.EInvalid, "field %s: %s", f.Keyname, ErrorMessage(err))); perr != nil {
				return false, perr
			}
		}
	}
	return sealed, probs.Err()
}

// sameSealed reports whether plain is the secret sealed in stored (so a load that
// gives the stored secret again changes nothing), in constant time; false when it
// cannot tell (no key, another key).
func (db *DB) sameSealed(plain, stored string) bool {
	if plain == "" || !strings.HasPrefix(stored, model.SealedPrefix) || strings.HasPrefix(plain, model.SealedPrefix) {
		return false
	}
	key, err := db.keys.get(false)
	if err != nil {
		return false
	}
	got, err := openWith(key, stored)
	return err == nil && subtle.ConstantTimeCompare(got, []byte(plain)) == 1
}

// CheckSecretKeyFile checks a key file named by the setting before anything is
// opened: nil when it is usable or does not exist yet (SQLite creates it at the first
// write that needs it; on PostgreSQL that write names the setting), else what is
// wrong (its mode, its content).
func CheckSecretKeyFile(path string) error {
	if _, err := readKeyFile(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// SecretKeyFile names where the key of encrypted secrets comes from, for messages:
// the key file's path, or the setting when there is none.
func (db *DB) SecretKeyFile() string {
	switch {
	case db.keys == nil || db.keys.file == "" && db.keys.key == nil:
		return SecretKeySetting + " (not set)"
	case db.keys.file == "":
		return "the key given to the store"
	}
	return db.keys.file
}

// SealedSecrets counts the encrypted secrets stored (values of secret fields with
// dataformat_ext encrypted), so the commands that move a database elsewhere can say
// that their key must go with it.
func (db *DB) SealedSecrets(ctx context.Context) (int, error) {
	names, err := db.SchemaNames(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, name := range names {
		s, err := db.Schema(ctx, name)
		if err != nil {
			return 0, err
		}
		var fields []string
		for _, f := range s.Fields {
			if f.IsEncryptedSecret() {
				fields = append(fields, f.Keyname)
			}
		}
		if len(fields) == 0 {
			continue
		}
		err = db.EachInstance(ctx, name, func(in *Instance) error {
			for _, f := range fields {
				if v, _ := in.Data[f].(string); strings.HasPrefix(v, model.SealedPrefix) {
					n++
				}
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
	}
	return n, nil
}
