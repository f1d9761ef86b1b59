package ipvsproxy

import (
	"encoding/hex"
	"strconv"

	"k8s.io/apimachinery/pkg/types"
)

// objectIdentity is an object's UID and resource version in 40 bytes: a UID
// as the API server writes it (a UUID, lower-case) in 16 bytes and a decimal
// resource version (etcd's) as a number; anything else is kept as written,
// behind the pointer. Every node caches every Service and EndpointSlice of
// the cluster: at 50,000 of each the two strings held 6 MB.
type objectIdentity struct {
	uid  [16]byte
	rv   uint64
	text *identityText // nil when both were kept as numbers, or are empty
	// hasUID and hasRV are false for an empty UID or version (objects a
	// test or inspect builds).
	hasUID, hasRV bool
}

type identityText struct {
	uid types.UID
	rv  string
}

func newIdentity(uid types.UID, rv string) objectIdentity {
	var id objectIdentity
	u, uidOK := parseUUID(string(uid))
	n, err := strconv.ParseUint(rv, 10, 64)
	rvOK := err == nil && strconv.FormatUint(n, 10) == rv
	if (uid != "" && !uidOK) || (rv != "" && !rvOK) {
		id.text = &identityText{uid: uid, rv: rv}
		return id
	}
	id.uid, id.rv, id.hasUID, id.hasRV = u, n, uid != "", rv != ""
	return id
}

func (id objectIdentity) UID() types.UID {
	switch {
	case id.text != nil:
		return id.text.uid
	case !id.hasUID:
		return ""
	}
	return types.UID(formatUUID(id.uid))
}

func (id objectIdentity) ResourceVersion() string {
	switch {
	case id.text != nil:
		return id.text.rv
	case !id.hasRV:
		return ""
	}
	return strconv.FormatUint(id.rv, 10)
}

// parseUUID reads the canonical lower-case form 8-4-4-4-12.
func parseUUID(s string) ([16]byte, bool) {
	var u [16]byte
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return u, false
	}
	j := 0
	for i := 0; i < 36; {
		if s[i] == '-' {
			i++
			continue
		}
		hi, ok1 := lowerHex(s[i])
		lo, ok2 := lowerHex(s[i+1])
		if !ok1 || !ok2 {
			return u, false
		}
		u[j] = hi<<4 | lo
		i, j = i+2, j+1
	}
	return u, true
}

func lowerHex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

func formatUUID(u [16]byte) string {
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:], u[10:])
	return string(b[:])
}
