package search

import "github.com/codeexec/codeexec/internal/porter"

// stopwords are dropped from queries (not from documents) unless the query
// has nothing else: they match almost every description and only add noise.
var stopwords = map[string]bool{
	"a": true, "an": true, "the": true, "to": true, "of": true, "for": true,
	"in": true, "on": true, "at": true, "by": true, "with": true, "from": true,
	"and": true, "or": true, "is": true, "are": true, "be": true, "it": true,
	"its": true, "this": true, "that": true, "these": true, "those": true,
	"me": true, "my": true, "i": true, "we": true, "our": true, "you": true,
	"your": true, "all": true, "some": true, "any": true, "can": true,
	"do": true, "does": true, "how": true, "what": true, "which": true,
	"please": true, "using": true, "use": true, "via": true, "into": true,
	"about": true, "as": true, "there": true, "them": true, "their": true,
	"tool": true, "tools": true, "want": true, "need": true, "should": true,
	"would": true, "could": true, "will": true, "if": true, "so": true,
	"out": true, "up": true, "one": true, "given": true, "specific": true,
	"between": true, "something": true, "thing": true, "stuff": true,
}

// synonymGroups are words an agent uses interchangeably for the same action
// or object in tool catalogues. A query word also matches the other words of
// its groups, at synonymWeight. The table is generic software vocabulary,
// not tuned to any one server.
var synonymGroups = [][]string{
	{"delete", "remove", "erase", "destroy", "drop", "rm", "del", "trash"},
	{"create", "make", "add", "new", "insert", "open", "schedule"},
	{"select", "choose", "pick"},
	{"close", "terminate", "quit", "exit", "shutdown"},
	{"get", "fetch", "retrieve", "read", "obtain", "show", "view", "lookup", "display", "see", "inspect"},
	{"list", "enumerate", "show", "browse", "index"},
	{"search", "find", "query", "lookup", "look", "locate", "seek", "grep", "discover"},
	{"update", "edit", "modify", "change", "alter", "patch", "set", "amend"},
	{"directory", "folder", "dir"},
	{"repository", "repo"},
	{"issue", "ticket", "bug"},
	{"message", "msg", "chat", "post"},
	{"execute", "run", "exec", "invoke", "call", "launch", "trigger"},
	{"user", "member", "person", "people", "account", "profile"},
	{"screenshot", "capture", "snapshot", "screen"},
	{"navigate", "goto", "visit", "open", "browse", "go", "load"},
	{"click", "press", "tap"},
	{"type", "fill", "enter", "input"},
	{"kubernetes", "k8s", "kube"},
	{"database", "db"},
	{"document", "doc", "docs"},
	{"image", "img", "picture", "photo"},
	{"information", "info", "details", "detail", "metadata"},
	{"environment", "env"},
	{"configuration", "config", "settings", "setting", "preferences"},
	{"authentication", "auth", "login", "credential", "credentials"},
	{"send", "post", "publish", "write"},
	{"write", "save", "store", "put", "persist"},
	{"move", "rename", "mv", "relocate"},
	{"copy", "duplicate", "clone", "cp"},
	{"error", "exception", "failure", "crash"},
	{"email", "mail", "gmail"},
	{"deploy", "deployment", "release", "ship"},
	{"url", "link", "website", "webpage", "site", "page"},
	{"download", "fetch"},
	{"upload", "attach"},
	{"tag", "label"},
	{"reply", "respond", "answer", "comment"},
	{"reaction", "emoji", "react"},
	{"channel", "room"},
	{"workflow", "pipeline", "ci"},
	{"memory", "remember", "knowledge", "memorize", "recall"},
	{"relation", "relationship", "connection"},
	{"entity", "node"},
	{"observation", "note", "fact"},
	{"time", "clock", "date"},
	{"timezone", "tz", "zone"},
	{"statistics", "stats", "metrics", "usage"},
	{"invoice", "bill", "billing"},
	{"payment", "charge", "pay"},
	{"customer", "client", "buyer"},
	{"secret", "password", "token"},
	{"bucket", "storage"},
	{"function", "lambda", "func"},
	{"variable", "var"},
	{"close", "resolve", "done", "complete", "finish"},
	{"assign", "assignee"},
	{"wiki", "documentation", "docs"},
	{"hover", "mouseover"},
	{"javascript", "js", "script"},
	{"summary", "summarize", "summarise", "overview"},
	{"diff", "difference", "compare"},
	{"stage", "add"},
	{"history", "log"},
	{"checkout", "switch"},
	{"status", "state"},
	{"team", "organization", "org", "group"},
	{"star", "favorite", "bookmark"},
	{"notification", "alert", "notify"},
	{"geocode", "coordinates", "latitude", "longitude", "geocoding"},
	{"place", "location", "venue", "business", "poi"},
	{"directions", "route", "navigation"},
	{"weather", "forecast"},
	{"schedule", "calendar", "event", "meeting", "appointment"},
	{"table", "collection"},
	{"record", "row", "document"},
	{"web", "internet", "online"},
	{"scrape", "crawl", "extract"},
	{"reasoning", "think", "thinking", "thought"},
	{"tab", "window"},
	{"pod", "container"},
	{"logs", "log", "output"},
}

// expansions are abbreviations that stand for several words.
var expansions = map[string][]string{
	"pr":  {"pull", "request"},
	"prs": {"pull", "request"},
	"mr":  {"merge", "request"},
	"mrs": {"merge", "request"},
	"dm":  {"direct", "message"},
	"cve": {"vulnerability"},
	"sql": {"query"},
}

// synonymWeight scales a synonym's score against the word the query used.
const synonymWeight = 0.6

// synonyms maps a stemmed query term to the stemmed terms it also matches.
var synonyms = buildSynonyms()

func buildSynonyms() map[string][]string {
	out := map[string][]string{}
	add := func(from, to string) {
		if from == to {
			return
		}
		for _, t := range out[from] {
			if t == to {
				return
			}
		}
		out[from] = append(out[from], to)
	}
	for _, g := range synonymGroups {
		for _, a := range g {
			for _, b := range g {
				add(porter.Stem(a), porter.Stem(b))
			}
		}
	}
	for w, ws := range expansions {
		for _, b := range ws {
			add(porter.Stem(w), porter.Stem(b))
		}
	}
	return out
}
