package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"dataservice/bootstrap"
	"dataservice/store"
	"dataservice/store/model"
)

// A serving process is a node: it records itself in the database's nodes table,
// renews its row every heartbeatEvery, and is live while its row was renewed within
// nodeLiveFor (three heartbeats: a node held up by one slow write is still live).
const (
	heartbeatEvery = 10 * time.Second
	nodeLiveFor    = 30 * time.Second
)

// errMixedVersions: a live node runs another SERVICE_VERSION, so this one does not
// serve (the start-up sequence would set DB_VERSION to its own version, and the two
// would flip it back and forth).
var errMixedVersions = errors.New("a live node runs another SERVICE_VERSION: stop every node before starting this version (docs/postgres.md, Upgrading)")

// nodeSettings are the settings every node must share, by name: each node's start-up
// sequence applies the admin password and the built-in key's secret, so nodes that
// differ would undo each other's at every start; a node with a shorter task lease
// would take over tasks a live node still runs; trusted proxies decide whose address
// a request counts as, for the sign-in throttle every node shares; the key of
// encrypted secrets is compared by its content (the file's path may differ from host
// to host), since a node with another key can neither open nor sign with the secrets
// the others sealed. (The version is compared on its own: a difference there refuses
// the start.)
func nodeSettings(s *settings) map[string]string {
	proxies := make([]string, len(s.TrustedProxies))
	for i, p := range s.TrustedProxies {
		proxies[i] = p.String()
	}
	slices.Sort(proxies)
	return map[string]string{
		"SERVICE_ADMIN_PASSWORD":  s.AdminPassword,
		"SERVICE_APIKEY_SECRET":   s.APIKeySecret,
		"SERVICE_TASK_LEASE":      s.TaskLease.String(),
		"SERVICE_TRUSTED_PROXIES": strings.Join(proxies, ","),
		"SERVICE_VERSION_DATE":    s.VersionDate,
		store.SecretKeySetting:    secretKeyText(s.SecretKeyFile),
	}
}

// secretKeyText is the content of the key file at path, "" when none is set or it
// cannot be read (the settings check refused an unusable one already).
func secretKeyText(path string) string {
	if path == "" {
		return ""
	}
	b, err := os.ReadFile(path)
	if err != nil || len(b) > 256 {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// hashSettings hashes each of nodeSettings under the database's salt: the table
// holds no setting's value, and a hash costs as much to reverse as a stored
// password hash.
func hashSettings(ctx context.Context, db *store.DB, s *settings) (map[string]string, error) {
	salt, err := db.NodeSalt(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for name, value := range nodeSettings(s) {
		// The name is hashed too, so two settings with one value do not show as equal.
		out[name] = model.SaltedHash(name+"\x00"+value, salt)
	}
	return out, nil
}

// joinNodes records this process as a node, after checking the live ones: another
// version refuses the start (a critical line naming both versions, errMixedVersions),
// other settings are warned about by name. It then renews the row every
// heartbeatEvery until leave, which removes it (a clean stop).
func joinNodes(ctx context.Context, db *store.DB, s *settings, log *slog.Logger) (leave func(), err error) {
	hashes, err := hashSettings(ctx, db, s)
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	self := &store.Node{ID: store.NewNodeID(), Host: host, Version: s.Version, Settings: hashes, StartedAt: time.Now()}
	err = db.JoinNodes(ctx, self, self.StartedAt.Add(-nodeLiveFor), func(live []store.Node) error {
		return checkLiveNodes(ctx, self, live, log, msgMixedServe)
	})
	if err != nil {
		return nil, err
	}
	log.Info("node recorded", "node", self.ID, "host", host, "live_nodes", liveCount(ctx, db, self.StartedAt))
	hbCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		heartbeat(hbCtx, db, self, log)
	}()
	return func() {
		stop()
		wg.Wait()
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := db.LeaveNodes(lctx, self.ID); err != nil {
			log.Warn("node row not removed: it counts as live for 30 s", "node", self.ID, "error", err)
		}
	}, nil
}

// The critical lines of a node (serve) and of migrate that find a live node of
// another version.
const (
	msgMixedServe   = "another version of dataservice is serving this database: not serving"
	msgMixedMigrate = "another version of dataservice is serving this database: not migrating"
)

// checkBesideNodes is migrate's check before its start-up sequence: like a starting
// node, it refuses to run beside a live node of another version (msgMixedMigrate) and
// warns of other settings, but records nothing.
func checkBesideNodes(ctx context.Context, db *store.DB, s *settings, log *slog.Logger) error {
	hashes, err := hashSettings(ctx, db, s)
	if err != nil {
		return err
	}
	nodes, err := db.Nodes(ctx)
	if err != nil {
		return err
	}
	since := time.Now().Add(-nodeLiveFor)
	live := slices.DeleteFunc(nodes, func(n store.Node) bool { return n.LastSeen.Before(since) })
	return checkLiveNodes(ctx, &store.Node{Version: s.Version, Settings: hashes}, live, log, msgMixedMigrate)
}

// checkLiveNodes is the check of the live nodes other than self; refusal is the
// critical line logged for another version.
func checkLiveNodes(ctx context.Context, self *store.Node, live []store.Node, log *slog.Logger, refusal string) error {
	for _, n := range live {
		if n.Version != self.Version {
			log.Log(ctx, bootstrap.LevelCritical, refusal,
				"version", self.Version, "live_version", n.Version, "live_node", n.ID, "live_host", n.Host)
			return fmt.Errorf("%w (this is %s; node %s on %s runs %s)", errMixedVersions, self.Version, n.ID, n.Host, n.Version)
		}
	}
	for _, n := range live {
		var differ []string
		for name, h := range self.Settings {
			if n.Settings[name] != h {
				differ = append(differ, name)
			}
		}
		if len(differ) > 0 {
			slices.Sort(differ)
			log.Warn("settings differ from a live node's: every node must have the same (docs/postgres.md, Settings must match)",
				"settings", strings.Join(differ, ","), "live_node", n.ID, "live_host", n.Host)
		}
	}
	return nil
}

// liveCount is how many nodes are live, this one included (0 when unknown: it is
// only logged).
func liveCount(ctx context.Context, db *store.DB, now time.Time) int {
	nodes, err := db.Nodes(ctx)
	if err != nil {
		return 0
	}
	n := 0
	for _, node := range nodes {
		if !node.LastSeen.Before(now.Add(-nodeLiveFor)) {
			n++
		}
	}
	return n
}

// heartbeat renews self's row every heartbeatEvery until ctx ends; a row that went
// missing (removed by hand) is recorded again. A failed renewal is logged and tried
// again at the next beat.
func heartbeat(ctx context.Context, db *store.DB, self *store.Node, log *slog.Logger) {
	t := time.NewTicker(heartbeatEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		ok, err := db.TouchNode(ctx, self.ID, now)
		if err == nil && !ok {
			again := *self
			again.StartedAt = now
			err = db.JoinNodes(ctx, &again, now, nil)
		}
		if err != nil && ctx.Err() == nil {
			log.Warn("node heartbeat failed", "node", self.ID, "error", err)
		}
	}
}
