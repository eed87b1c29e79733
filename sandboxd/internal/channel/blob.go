package channel

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// Blob frames carry bytes beside their JSON rather than in it: a chunk of
// a checkpoint is a pickle of up to 32 MiB, and base64 in JSON would cost
// a third more bytes and, on both sides, an encoding pass each way.
//
// A blob frame's body is a zero byte (no JSON text starts with one), the
// length of the JSON as 4 bytes big-endian, the JSON, then the blobs its
// "blobs" field lists, in that order, back to back. A frame whose body
// does not start with a zero byte is JSON alone, and lists no blobs.

// Blob names one blob of a frame and its size.
type Blob struct {
	ID    string `json:"id"`
	Bytes int    `json:"n"`
}

// chunked is a message whose chunks travel as blobs.
type chunked interface {
	Message
	chunkMap() map[string][]byte
	blobList() []Blob
	// listed returns a copy of the message with list as its Blobs.
	listed(list []Blob) Message
	// setChunks sets Chunks and clears Blobs.
	setChunks(chunks map[string][]byte)
}

func (c *Checkpoint) chunkMap() map[string][]byte   { return c.Chunks }
func (c *Checkpoint) blobList() []Blob              { return c.Blobs }
func (c *Checkpoint) listed(list []Blob) Message    { cp := *c; cp.Blobs = list; return &cp }
func (c *Checkpoint) setChunks(m map[string][]byte) { c.Chunks, c.Blobs = m, nil }

func (d *Display) chunkMap() map[string][]byte   { return d.Chunks }
func (d *Display) blobList() []Blob              { return d.Blobs }
func (d *Display) listed(list []Blob) Message    { cp := *d; cp.Blobs = list; return &cp }
func (d *Display) setChunks(m map[string][]byte) { d.Chunks, d.Blobs = m, nil }

func (r *Restore) chunkMap() map[string][]byte   { return r.Chunks }
func (r *Restore) blobList() []Blob              { return r.Blobs }
func (r *Restore) listed(list []Blob) Message    { cp := *r; cp.Blobs = list; return &cp }
func (r *Restore) setChunks(m map[string][]byte) { r.Chunks, r.Blobs = m, nil }

var (
	errShortBlobFrame = errors.New("blob frame too short for its JSON length")
	errBlobsElsewhere = errors.New("a frame of this type carries no blobs")
)

// splitBlobs returns a frame body's JSON and, for a blob frame, the bytes
// after it (non-nil, though maybe empty); nil for a frame of JSON alone.
func splitBlobs(body []byte) (js, tail []byte, err error) {
	if len(body) == 0 || body[0] != 0 {
		return body, nil, nil
	}
	if len(body) < 5 {
		return nil, nil, errShortBlobFrame
	}
	n := binary.BigEndian.Uint32(body[1:5])
	if uint64(n) > uint64(len(body)-5) {
		return nil, nil, fmt.Errorf("%w: %d bytes of JSON announced, %d in the frame", errShortBlobFrame, n, len(body)-5)
	}
	return body[5 : 5+n], body[5+n:], nil
}

// takeBlobs gives m the chunks its blob list names in tail, which must hold
// exactly those. The chunks share tail's memory.
func takeBlobs(m Message, tail []byte) error {
	c, ok := m.(chunked)
	if !ok {
		if tail != nil {
			return errBlobsElsewhere
		}
		return nil
	}
	list := c.blobList()
	if len(list) > 0 && tail == nil {
		return fmt.Errorf("%d blobs listed in a frame of JSON alone", len(list))
	}
	if len(list) == 0 {
		if len(tail) > 0 {
			return fmt.Errorf("%d bytes of blobs that no blob entry names", len(tail))
		}
		c.setChunks(nil)
		return nil
	}
	chunks := make(map[string][]byte, len(list))
	off := 0
	for _, b := range list {
		if b.ID == "" {
			return errors.New("a blob with no id")
		}
		if _, dup := chunks[b.ID]; dup {
			return fmt.Errorf("blob %q listed twice", b.ID)
		}
		if b.Bytes < 0 || b.Bytes > len(tail)-off {
			return fmt.Errorf("blob %q of %d bytes runs past the frame's %d bytes of blobs", b.ID, b.Bytes, len(tail))
		}
		chunks[b.ID] = tail[off : off+b.Bytes : off+b.Bytes]
		off += b.Bytes
	}
	if off != len(tail) {
		return fmt.Errorf("%d bytes of blobs after the last one listed", len(tail)-off)
	}
	c.setChunks(chunks)
	return nil
}

// listBlobs returns m as it is to be encoded, with its chunks listed as
// blobs in ID order, and the chunks in that order (nil for none). m itself
// is not changed.
func listBlobs(m Message) (Message, [][]byte) {
	c, ok := m.(chunked)
	if !ok {
		return m, nil
	}
	chunks := c.chunkMap()
	if len(chunks) == 0 {
		return c.listed(nil), nil
	}
	ids := make([]string, 0, len(chunks))
	for id := range chunks {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	list := make([]Blob, len(ids))
	data := make([][]byte, len(ids))
	for i, id := range ids {
		list[i], data[i] = Blob{ID: id, Bytes: len(chunks[id])}, chunks[id]
	}
	return c.listed(list), data
}

// withBlobs makes js a blob frame's body carrying blobs; js itself when
// there are none.
func withBlobs(js []byte, blobs [][]byte) []byte {
	if blobs == nil {
		return js
	}
	size := 5 + len(js)
	for _, b := range blobs {
		size += len(b)
	}
	body := make([]byte, 0, size)
	body = append(body, 0)
	body = binary.BigEndian.AppendUint32(body, uint32(len(js)))
	body = append(body, js...)
	for _, b := range blobs {
		body = append(body, b...)
	}
	return body
}
