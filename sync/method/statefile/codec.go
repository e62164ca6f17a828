package statefile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Magic is the first word of every slot state file.
const Magic = 0x1051CA1

// headerSize is magic, checksum, version and length; the checksum covers the rest of the file
// from the version on.
const headerSize = 16

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Persistency values of ReplicationSlotPersistency.
const (
	Persistent = 0
	Ephemeral  = 1
	Temporary  = 2
)

// layout is where each field of ReplicationSlotPersistentData lies for one family of majors
// (offsets inside the struct; -1: absent).
type layout struct {
	majors                        string
	version, length               uint32
	confirmedFlush, invalidatedAt int
	invalidatedCause              int
	twoPhaseAt, twoPhase, plugin  int
	synced, failover              int
}

// layouts, told apart by (version, length). SLOT_VERSION stayed 2 from 11 to 15 while the
// struct grew; the length field tells them apart.
var layouts = []layout{
	{majors: "11-12", version: 2, length: 160, confirmedFlush: 88, invalidatedAt: -1, invalidatedCause: -1, twoPhaseAt: -1, twoPhase: -1, plugin: 96, synced: -1, failover: -1},
	{majors: "13", version: 2, length: 168, confirmedFlush: 96, invalidatedAt: 88, invalidatedCause: -1, twoPhaseAt: -1, twoPhase: -1, plugin: 104, synced: -1, failover: -1},
	{majors: "14-15", version: 2, length: 184, confirmedFlush: 96, invalidatedAt: 88, invalidatedCause: -1, twoPhaseAt: 104, twoPhase: 112, plugin: 113, synced: -1, failover: -1},
	{majors: "16", version: 3, length: 184, confirmedFlush: 96, invalidatedAt: -1, invalidatedCause: 88, twoPhaseAt: 104, twoPhase: 112, plugin: 113, synced: -1, failover: -1},
	{majors: "17-19", version: 5, length: 184, confirmedFlush: 96, invalidatedAt: -1, invalidatedCause: 88, twoPhaseAt: 104, twoPhase: 112, plugin: 113, synced: 177, failover: 178},
}

// State is one decoded slot state file. Encode writes back exactly the bytes Parse read, with
// any field changes applied (padding is kept as it was).
type State struct {
	Majors         string // which majors write this layout, e.g. "14-15"
	Version        uint32
	Name           string
	Database       uint32 // OID; 0 for a physical slot
	Persistency    uint32
	Xmin           uint32
	CatalogXmin    uint32
	RestartLSN     uint64
	ConfirmedFlush uint64
	InvalidatedAt  uint64 // 13-15: the restart_lsn at invalidation, 0 if valid
	Invalidated    uint32 // 16+: ReplicationSlotInvalidationCause, 0 if valid
	TwoPhaseAt     uint64
	TwoPhase       bool
	Plugin         string
	Synced         bool
	Failover       bool

	lay layout
	raw []byte
}

// ErrMalformed is wrapped by every parse error.
var ErrMalformed = errors.New("malformed slot state file")

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// Parse decodes a state file, checking magic, length, layout and checksum. It never panics.
func Parse(data []byte) (*State, error) {
	if len(data) < headerSize {
		return nil, malformed("%d bytes, shorter than the %d-byte header", len(data), headerSize)
	}
	le := binary.LittleEndian
	if m := le.Uint32(data[0:]); m != Magic {
		return nil, malformed("magic %#x, want %#x", m, Magic)
	}
	version, length := le.Uint32(data[8:]), le.Uint32(data[12:])
	var lay *layout
	for i := range layouts {
		if layouts[i].version == version && layouts[i].length == length {
			lay = &layouts[i]
		}
	}
	if lay == nil {
		return nil, malformed("version %d with length %d is no known layout", version, length)
	}
	if len(data) != headerSize+int(length) {
		return nil, malformed("%d bytes, want %d for version %d", len(data), headerSize+int(length), version)
	}
	if got, want := crc32.Checksum(data[8:], castagnoli), le.Uint32(data[4:]); got != want {
		return nil, malformed("checksum %#x, file says %#x", got, want)
	}
	body := data[headerSize:]
	name, err := cString(body[0:64], "name")
	if err != nil {
		return nil, err
	}
	plugin, err := cString(body[lay.plugin:lay.plugin+64], "plugin")
	if err != nil {
		return nil, err
	}
	s := &State{Majors: lay.majors, Version: version, Name: name, Plugin: plugin, lay: *lay,
		Database: le.Uint32(body[64:]), Persistency: le.Uint32(body[68:]), Xmin: le.Uint32(body[72:]),
		CatalogXmin: le.Uint32(body[76:]), RestartLSN: le.Uint64(body[80:]), ConfirmedFlush: le.Uint64(body[lay.confirmedFlush:]),
		raw: append([]byte(nil), data...)}
	if lay.invalidatedAt >= 0 {
		s.InvalidatedAt = le.Uint64(body[lay.invalidatedAt:])
	}
	if lay.invalidatedCause >= 0 {
		s.Invalidated = le.Uint32(body[lay.invalidatedCause:])
	}
	if lay.twoPhase >= 0 {
		s.TwoPhaseAt = le.Uint64(body[lay.twoPhaseAt:])
		if s.TwoPhase, err = cBool(body[lay.twoPhase], "two_phase"); err != nil {
			return nil, err
		}
	}
	if lay.synced >= 0 {
		if s.Synced, err = cBool(body[lay.synced], "synced"); err != nil {
			return nil, err
		}
		if s.Failover, err = cBool(body[lay.failover], "failover"); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func cString(b []byte, field string) (string, error) {
	for i, c := range b {
		if c == 0 {
			return string(b[:i]), nil
		}
	}
	return "", malformed("%s is not NUL-terminated", field)
}

func cBool(b byte, field string) (bool, error) {
	switch b {
	case 0:
		return false, nil
	case 1:
		return true, nil
	}
	return false, malformed("%s is %d, not a bool", field, b)
}

// Encode writes the state back in its layout, with a fresh checksum.
func (s *State) Encode() ([]byte, error) {
	if s.raw == nil {
		return nil, errors.New("encode slot state: only parsed states can be encoded")
	}
	if len(s.Name) >= 64 || len(s.Plugin) >= 64 {
		return nil, errors.New("encode slot state: name and plugin must be shorter than 64 bytes")
	}
	out := append([]byte(nil), s.raw...)
	le := binary.LittleEndian
	body := out[headerSize:]
	putName(body[0:64], s.Name)
	putName(body[s.lay.plugin:s.lay.plugin+64], s.Plugin)
	le.PutUint32(body[64:], s.Database)
	le.PutUint32(body[68:], s.Persistency)
	le.PutUint32(body[72:], s.Xmin)
	le.PutUint32(body[76:], s.CatalogXmin)
	le.PutUint64(body[80:], s.RestartLSN)
	le.PutUint64(body[s.lay.confirmedFlush:], s.ConfirmedFlush)
	if s.lay.invalidatedAt >= 0 {
		le.PutUint64(body[s.lay.invalidatedAt:], s.InvalidatedAt)
	}
	if s.lay.invalidatedCause >= 0 {
		le.PutUint32(body[s.lay.invalidatedCause:], s.Invalidated)
	}
	if s.lay.twoPhase >= 0 {
		le.PutUint64(body[s.lay.twoPhaseAt:], s.TwoPhaseAt)
		body[s.lay.twoPhase] = boolByte(s.TwoPhase)
	}
	if s.lay.synced >= 0 {
		body[s.lay.synced] = boolByte(s.Synced)
		body[s.lay.failover] = boolByte(s.Failover)
	}
	le.PutUint32(out[4:], crc32.Checksum(out[8:], castagnoli))
	return out, nil
}

// putName writes a NameData: the string, then NUL bytes to the end (PostgreSQL zeroes it).
func putName(b []byte, s string) {
	n := copy(b, s)
	for i := n; i < len(b); i++ {
		b[i] = 0
	}
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// Invalid reports whether the slot was invalidated.
func (s *State) Invalid() bool { return s.InvalidatedAt != 0 || s.Invalidated != 0 }
