package db

import (
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/pyjson"
)

// pyJSON re-writes a JSON value the way Python's json.dumps writes it, which is what Magnum's
// JSONEncodedDict/JSONEncodedList columns hold: a row written here must read back in Magnum
// exactly as one Magnum wrote. The drivers store the text as a string, not bytes.
func pyJSON(raw []byte) (string, error) {
	b, err := pyjson.Reencode(raw)
	return string(b), err
}
