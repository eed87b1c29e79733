package embed

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// maxWordChars is BERT's limit: a longer word is one unknown token.
const maxWordChars = 100

// wordPiece is BERT's uncased tokenizer (BasicTokenizer then WordPiece),
// as the model was trained with: lowercase, accents stripped, split at
// whitespace and punctuation, CJK characters alone, then each word split
// greedily into the longest vocabulary pieces, later pieces marked "##".
type wordPiece struct {
	vocab map[string]int32
	unk   int32
}

// appendIDs appends the token ids of text to dst. A word that cannot be
// split into known pieces is one unknown token, as in BERT.
func (wp *wordPiece) appendIDs(dst []int32, text string) []int32 {
	var word strings.Builder
	flush := func() {
		if word.Len() > 0 {
			dst = wp.appendWord(dst, word.String())
			word.Reset()
		}
	}
	for _, r := range norm.NFD.String(text) {
		switch {
		case r == 0 || r == utf8.RuneError || isControl(r):
			continue
		case unicode.Is(unicode.Mn, r):
			continue // accents stripped
		case unicode.IsSpace(r):
			flush()
		case isPunct(r) || isCJK(r):
			flush()
			dst = wp.appendWord(dst, string(unicode.ToLower(r)))
		default:
			word.WriteRune(unicode.ToLower(r))
		}
	}
	flush()
	return dst
}

// appendWord appends the pieces of one lowercase word.
func (wp *wordPiece) appendWord(dst []int32, w string) []int32 {
	if utf8.RuneCountInString(w) > maxWordChars {
		return append(dst, wp.unk)
	}
	start := len(dst)
	for rest, prefix := w, ""; rest != ""; prefix = "##" {
		end := len(rest)
		for ; end > 0; end-- {
			if end < len(rest) && !utf8.RuneStart(rest[end]) {
				continue // never cut inside a rune
			}
			if id, ok := wp.vocab[prefix+rest[:end]]; ok {
				dst = append(dst, id)
				break
			}
		}
		if end == 0 {
			return append(dst[:start], wp.unk)
		}
		rest = rest[end:]
	}
	return dst
}

// isControl is BERT's _is_control: control and format characters other
// than the whitespace ones.
func isControl(r rune) bool {
	if r == '\t' || r == '\n' || r == '\r' {
		return false
	}
	return unicode.In(r, unicode.Cc, unicode.Cf)
}

// isPunct is BERT's _is_punctuation: every non-alphanumeric ASCII
// character, and Unicode punctuation.
func isPunct(r rune) bool {
	if (r >= 33 && r <= 47) || (r >= 58 && r <= 64) || (r >= 91 && r <= 96) || (r >= 123 && r <= 126) {
		return true
	}
	return unicode.IsPunct(r)
}

// isCJK is BERT's _is_chinese_char: the CJK Unified Ideographs blocks.
func isCJK(r rune) bool {
	return (r >= 0x4E00 && r <= 0x9FFF) || (r >= 0x3400 && r <= 0x4DBF) || (r >= 0x20000 && r <= 0x2A6DF) ||
		(r >= 0x2A700 && r <= 0x2B73F) || (r >= 0x2B740 && r <= 0x2B81F) || (r >= 0x2B820 && r <= 0x2CEAF) ||
		(r >= 0xF900 && r <= 0xFAFF) || (r >= 0x2F800 && r <= 0x2FA1F)
}
