package store

import (
	"context"
)

// The console reads the instances of a few classes at every page: the `_home`
// entries of its sidebar, the `_dataview`s of a list, and the role graph (`_role`,
// `_group`) of every user's permissions. They are kept in memory at the schema
// generation: every transaction that writes one of them bumps the generation at
// commit, as a schema change does (noteCachedClass, and every migration
// transaction), so each process, another node's included, reads them again at its
// next request. The copies are shared: callers never change them.
var cachedClasses = map[string]bool{"_home": true, "_dataview": true, "_role": true, "_group": true}

// maxCachedInstances bounds a cached class: a class holding more is read at each call.
const maxCachedInstances = 10_000

// classCache is the instances of the cached classes, at gen and local (as the schema
// cache is kept).
type classCache struct {
	gen   int64
	local uint64
	byCls map[string][]*Instance
}

// noteCachedClass marks the transaction as changing cached data when it writes an
// instance of a cached class: its commit bumps the generation.
func (tx *Tx) noteCachedClass(cls string) {
	if cachedClasses[cls] {
		tx.touched = true
	}
}

// ClassInstances returns every instance of cls in id order, from memory when cls is a
// cached class (`_home`, `_dataview`, `_role`, `_group`) and the schema generation has
// not moved since it was read. The instances are shared: callers must not change them.
func (db *DB) ClassInstances(ctx context.Context, cls string) ([]*Instance, error) {
	if !cachedClasses[cls] {
		return db.allInstances(ctx, cls)
	}
	gen, err := db.generation(ctx)
	if err != nil {
		return nil, err
	}
	db.mu.RLock()
	c, local := db.classes, db.local
	list, ok := c.byCls[cls]
	fresh := ok && c.gen == gen && c.local == local
	db.mu.RUnlock()
	if fresh {
		return list, nil
	}
	list, err = db.allInstances(ctx, cls)
	if err != nil || len(list) > maxCachedInstances {
		return list, err
	}
	db.mu.Lock()
	// Kept only when no local change dropped the schema cache while this read ran.
	if db.local == local {
		if db.classes.byCls == nil || db.classes.gen != gen || db.classes.local != local {
			db.classes = classCache{gen: gen, local: local, byCls: map[string][]*Instance{}}
		}
		db.classes.byCls[cls] = list
	}
	db.mu.Unlock()
	return list, nil
}

// allInstances reads every instance of cls in id order.
func (db *DB) allInstances(ctx context.Context, cls string) ([]*Instance, error) {
	list := []*Instance{}
	err := db.EachInstance(ctx, cls, func(in *Instance) error {
		list = append(list, in)
		return nil
	})
	return list, err
}

// CacheStamp names a state of the data the caches above keep (schemas, reference
// fields, the cached classes): two stamps differ whenever any of it may have changed
// between them, in this process or another. What a caller derives from that data
// alone (and the caller's permissions) it may keep under the stamp.
type CacheStamp struct {
	gen   int64
	local uint64
}

// CacheStamp returns the stamp of the cached data as of ctx's request scope.
func (db *DB) CacheStamp(ctx context.Context) (CacheStamp, error) {
	gen, err := db.generation(ctx)
	if err != nil {
		return CacheStamp{}, err
	}
	db.mu.RLock()
	local := db.local
	db.mu.RUnlock()
	return CacheStamp{gen: gen, local: local}, nil
}
