package store

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"dataservice/store/model"
)

// IPv4 address arithmetic for the IPAM pages. An address is a uint32 in host order;
// ranges are inclusive. ipam_ip keynames are the address as 8 lowercase hex digits, so
// they sort as the numbers they spell and a range of addresses is a range of keynames
// in the (classname, keyname) index.

// IPRange is the inclusive range of addresses First..Last.
type IPRange struct{ First, Last uint32 }

// Size is the number of addresses in r.
func (r IPRange) Size() uint64 { return uint64(r.Last) - uint64(r.First) + 1 }

// Contains reports whether a is in r.
func (r IPRange) Contains(a uint32) bool { return a >= r.First && a <= r.Last }

// ParseIPv4 parses a dotted IPv4 address (canonical form, as ipv4 fields hold it).
func ParseIPv4(s string) (uint32, error) {
	if err := model.CheckIPv4(s, ""); err != nil {
		return 0, &model.Error{Code: model.EInvalid, Message: err.Error()}
	}
	b := netip.MustParseAddr(s).As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]), nil
}

// ParseSubnet parses an aligned IPv4 CIDR (A.B.C.D/N without host bits), the form of
// ipam_subnet keynames.
func ParseSubnet(s string) (netip.Prefix, error) {
	if err := model.CheckIPv4(s, "subnet strict"); err != nil {
		return netip.Prefix{}, &model.Error{Code: model.EInvalid, Message: err.Error()}
	}
	return netip.MustParsePrefix(s), nil
}

// IPv4String is the dotted form of a.
func IPv4String(a uint32) string {
	return netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)}).String()
}

// hexIPOf is the ipam_ip keyname of a.
func hexIPOf(a uint32) string { return fmt.Sprintf("%08x", a) }

func addrOf(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

// PrefixRange is every address of the IPv4 prefix p (network to broadcast).
func PrefixRange(p netip.Prefix) IPRange {
	first := addrOf(p.Masked().Addr())
	host := uint32(uint64(1)<<(32-p.Bits()) - 1)
	return IPRange{First: first, Last: first | host}
}

// HostRange is the addresses of p that hosts may use: all but the network and the
// broadcast address, except for /31 (point-to-point links) and /32, where every
// address is usable.
func HostRange(p netip.Prefix) IPRange {
	r := PrefixRange(p)
	if p.Bits() < 31 {
		r.First++
		r.Last--
	}
	return r
}

// ipKeyRange is the SQL condition selecting the ipam_ip instances (alias i) whose hex
// keyname lies in a range (two parameters: first and last keyname). Keynames that are
// not 8 hex digits (left by an old version) sort among them and are excluded.
func (db *DB) ipKeyRange() string {
	return "i.classname = 'ipam_ip' AND i.keyname >= ? AND i.keyname <= ?\n\tAND " + db.dia.hexKeyname("i.keyname")
}

// CountIPs counts the ipam_ip instances whose address is in r. The /16 blocks r covers
// whole are read from their maintained counts (table ipam_blocks); the addresses in the
// partial blocks at its ends are counted in the keyname index. So a count reads at most
// one row per /16 and two blocks' worth of index entries (2 x 65,536), whatever the
// size of r or the number of addresses.
func (db *DB) CountIPs(ctx context.Context, r IPRange) (int, error) {
	first, last := r.First>>16, r.Last>>16
	if first == last {
		return db.countIPsIndexed(ctx, r)
	}
	total := 0
	if r.First&0xffff != 0 { // a partial first block
		n, err := db.countIPsIndexed(ctx, IPRange{r.First, r.First | 0xffff})
		if err != nil {
			return 0, err
		}
		total += n
		first++
	}
	if r.Last&0xffff != 0xffff { // a partial last block
		n, err := db.countIPsIndexed(ctx, IPRange{r.Last &^ 0xffff, r.Last})
		if err != nil {
			return 0, err
		}
		total += n
		last--
	}
	if first <= last {
		var n int
		err := db.rqueryRow(ctx, db.dia.countBlocks,
			fmt.Sprintf("%04x", first), fmt.Sprintf("%04x", last)).Scan(&n)
		if err != nil {
			return 0, fmt.Errorf("count addresses %s-%s: %w", IPv4String(r.First), IPv4String(r.Last), err)
		}
		total += n
	}
	return total, nil
}

// countIPsIndexed counts the ipam_ip instances in r in the keyname index.
func (db *DB) countIPsIndexed(ctx context.Context, r IPRange) (int, error) {
	var n int
	err := db.rqueryRow(ctx, "SELECT count(*) FROM instances i WHERE "+db.ipKeyRange(),
		hexIPOf(r.First), hexIPOf(r.Last)).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count addresses %s-%s: %w", IPv4String(r.First), IPv4String(r.Last), err)
	}
	return n, nil
}

// SubnetUsage returns how many of p's usable addresses (HostRange) have an ipam_ip
// instance, and how many usable addresses p has.
func (db *DB) SubnetUsage(ctx context.Context, p netip.Prefix) (used int, usable uint64, err error) {
	all, hosts := PrefixRange(p), HostRange(p)
	if used, err = db.CountIPs(ctx, all); err != nil {
		return 0, 0, err
	}
	if hosts != all { // the network and broadcast addresses are not counted
		for _, a := range []uint32{all.First, all.Last} {
			n, err := db.countIPsIndexed(ctx, IPRange{a, a})
			if err != nil {
				return 0, 0, err
			}
			used -= n
		}
	}
	return used, hosts.Size(), nil
}

// IPsInRange returns up to limit ipam_ip instances whose address is in r, in address
// order (an index range scan).
func (db *DB) IPsInRange(ctx context.Context, r IPRange, limit int) ([]*Instance, error) {
	rows, err := db.reader().queryContext(ctx, "SELECT "+instanceColsI+" FROM instances i WHERE "+db.ipKeyRange()+
		" ORDER BY i.keyname LIMIT ?", hexIPOf(r.First), hexIPOf(r.Last), limit)
	if err != nil {
		return nil, fmt.Errorf("list addresses %s-%s: %w", IPv4String(r.First), IPv4String(r.Last), err)
	}
	defer rows.Close()
	var out []*Instance
	for rows.Next() {
		in, err := scanInstance(rows)
		if err != nil {
			return nil, fmt.Errorf("list addresses: %w", err)
		}
		out = append(out, in)
	}
	return out, rows.Err()
}

// IPOf is the address an ipam_ip instance stands for (its hex keyname).
func IPOf(in *Instance) (uint32, bool) {
	var a uint32
	if len(in.Keyname) != 8 {
		return 0, false
	}
	for _, c := range in.Keyname {
		switch {
		case c >= '0' && c <= '9':
			a = a<<4 | uint32(c-'0')
		case c >= 'a' && c <= 'f':
			a = a<<4 | uint32(c-'a'+10)
		default:
			return 0, false
		}
	}
	return a, true
}

// Subnet is an ipam_subnet instance with its prefix (its keyname).
type Subnet struct {
	Prefix   netip.Prefix
	Range    IPRange
	Instance *Instance
	// Depth is how many other listed subnets contain this one (in Subnets' list).
	Depth int
}

func subnetOf(in *Instance) (Subnet, bool) {
	p, err := ParseSubnet(in.Keyname)
	if err != nil {
		return Subnet{}, false
	}
	return Subnet{Prefix: p, Range: PrefixRange(p), Instance: in}, true
}

// sortSubnets orders subnets by address, a containing subnet before those inside it,
// and sets their Depth.
func sortSubnets(list []Subnet) {
	sort.Slice(list, func(i, j int) bool {
		if list[i].Range.First != list[j].Range.First {
			return list[i].Range.First < list[j].Range.First
		}
		return list[i].Prefix.Bits() < list[j].Prefix.Bits()
	})
	// Aligned prefixes either nest or are disjoint: a stack of the enclosing ones.
	var stack []IPRange
	for i := range list {
		for len(stack) > 0 && stack[len(stack)-1].Last < list[i].Range.First {
			stack = stack[:len(stack)-1]
		}
		list[i].Depth = len(stack)
		stack = append(stack, list[i].Range)
	}
}

// Subnets returns every ipam_subnet whose keyname is an aligned CIDR, ordered by
// address with containing subnets first, and how many instances were left out because
// their keyname is not one (kept by an old version's migration). It reads every
// ipam_subnet instance.
func (db *DB) Subnets(ctx context.Context) ([]Subnet, int, error) {
	var out []Subnet
	skipped := 0
	err := db.EachInstance(ctx, "ipam_subnet", func(in *Instance) error {
		s, ok := subnetOf(in)
		if !ok {
			skipped++
			return nil
		}
		out = append(out, s)
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	sortSubnets(out)
	return out, skipped, nil
}

// SubnetsContaining returns the ipam_subnets that contain address a, widest first. An
// address lies in at most 33 aligned prefixes (/0 to /32), so this is 33 keyname
// lookups in the index, whatever the number of subnets.
func (db *DB) SubnetsContaining(ctx context.Context, a uint32) ([]Subnet, error) {
	addr := netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)})
	args := []any{}
	for bits := 0; bits <= 32; bits++ {
		args = append(args, netip.PrefixFrom(addr, bits).Masked().String())
	}
	rows, err := db.reader().queryContext(ctx, "SELECT "+instanceColsI+" FROM instances i WHERE i.classname = 'ipam_subnet' AND i.keyname IN (?"+
		strings.Repeat(", ?", len(args)-1)+")", args...)
	if err != nil {
		return nil, fmt.Errorf("subnets containing %s: %w", addr, err)
	}
	defer rows.Close()
	var out []Subnet
	for rows.Next() {
		in, err := scanInstance(rows)
		if err != nil {
			return nil, fmt.Errorf("subnets containing %s: %w", addr, err)
		}
		if s, ok := subnetOf(in); ok {
			out = append(out, s)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("subnets containing %s: %w", addr, err)
	}
	sortSubnets(out)
	return out, nil
}

// Address rows of a subnet page (AddressRow.Kind).
const (
	AddrUsed      = "used"      // an ipam_ip instance
	AddrFree      = "free"      // a range of usable addresses without one
	AddrNetwork   = "network"   // the network address, not usable (prefixes up to /30)
	AddrBroadcast = "broadcast" // the broadcast address, not usable (prefixes up to /30)
)

// AddressRow is one row of a subnet's address list: an address in use, a free range,
// or the unused network or broadcast address.
type AddressRow struct {
	Kind  string
	Range IPRange
	// IP is the ipam_ip instance of a used address.
	IP *Instance
}

// AddressPage is a page of a subnet's addresses.
type AddressPage struct {
	Rows []AddressRow
	// Used is how many rows are addresses in use.
	Used int
	// Next is the address the following page starts at; More is false on the last page.
	Next uint32
	More bool
}

// SubnetAddresses lists the addresses of prefix p from address from on: up to limit
// ipam_ip instances in address order, with the free ranges between them. It reads
// limit+1 instances from the index, whatever the size of p.
func (db *DB) SubnetAddresses(ctx context.Context, p netip.Prefix, from uint32, limit int) (*AddressPage, error) {
	if limit < 1 {
		limit = 1
	}
	all := PrefixRange(p)
	if from < all.First {
		from = all.First
	}
	if !all.Contains(from) {
		return nil, model.Errorf(model.EInvalid, "%s is not in %s", IPv4String(from), p)
	}
	ips, err := db.IPsInRange(ctx, IPRange{First: from, Last: all.Last}, limit+1)
	if err != nil {
		return nil, err
	}
	pg := &AddressPage{}
	var used []uint32
	for _, in := range ips {
		if a, ok := IPOf(in); ok {
			used = append(used, a)
		}
	}
	end := all.Last
	if len(used) > limit {
		pg.Next, pg.More = used[limit], true
		end = used[limit] - 1 // used[limit] > from: the range below it is not empty
		used, ips = used[:limit], ips[:limit]
	}
	pg.Rows = addressRows(p, IPRange{First: from, Last: end}, used, ips)
	pg.Used = len(used)
	return pg, nil
}

// addressRows lays out r (a part of p) as rows: the used addresses (sorted, with their
// instances) and, between them, the free ranges and the unused network and broadcast
// addresses.
func addressRows(p netip.Prefix, r IPRange, used []uint32, ips []*Instance) []AddressRow {
	all, hosts := PrefixRange(p), HostRange(p)
	var rows []AddressRow
	gap := func(first, last uint64) { // the unused addresses first..last (first > last: none)
		if first > last {
			return
		}
		if hosts != all && first == uint64(all.First) {
			rows = append(rows, AddressRow{Kind: AddrNetwork, Range: IPRange{all.First, all.First}})
			first++
		}
		bcast := hosts != all && last == uint64(all.Last)
		if bcast {
			last--
		}
		if first <= last {
			rows = append(rows, AddressRow{Kind: AddrFree, Range: IPRange{uint32(first), uint32(last)}})
		}
		if bcast {
			rows = append(rows, AddressRow{Kind: AddrBroadcast, Range: IPRange{all.Last, all.Last}})
		}
	}
	next := uint64(r.First)
	for i, a := range used {
		if uint64(a) > next {
			gap(next, uint64(a)-1)
		}
		rows = append(rows, AddressRow{Kind: AddrUsed, Range: IPRange{a, a}, IP: ips[i]})
		next = uint64(a) + 1
	}
	gap(next, uint64(r.Last))
	return rows
}
