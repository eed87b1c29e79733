package porter

import "testing"

func TestStem(t *testing.T) {
	t.Parallel()
	// Expected stems from Porter's published vocabulary/output lists.
	tests := map[string]string{
		"caresses": "caress", "ponies": "poni", "cats": "cat", "feed": "feed",
		"agreed": "agre", "plastered": "plaster", "motoring": "motor",
		"sing": "sing", "conflated": "conflat", "hopping": "hop",
		"filing": "file", "happy": "happi", "relational": "relat",
		"conditional": "condit", "rational": "ration", "digitizer": "digit",
		"generalization": "gener", "electrical": "electr", "hopeful": "hope",
		"goodness": "good", "revival": "reviv", "adjustment": "adjust",
		"adoption": "adopt", "controll": "control", "roll": "roll",
		"files": "file", "repositories": "repositori", "repository": "repositori",
		"creating": "creat", "created": "creat", "create": "creat",
		"listing": "list", "issues": "issu", "issue": "issu", "a": "a",
		"s3": "s3", "naïve": "naïve",
	}
	for in, want := range tests {
		if got := Stem(in); got != want {
			t.Errorf("Stem(%q) = %q, want %q", in, got, want)
		}
	}
}
