"""How tool-doc queries are checked, and the shape of a search's result."""


def check_detail(detail):
    if detail not in ("summary", "full"):
        raise ValueError("detail must be 'summary' or 'full', not %r" % (detail,))
    return detail


def _limit(limit):
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise TypeError("limit must be an int, not %s" % type(limit).__name__)
    return max(1, min(20, limit))


class ToolDocs(list):
    """A search result: a list of docs (upstream's shape) that also says how
    many tools matched in all (`total`), whether the list was cut to the
    limit (`truncated`), and which servers could not be searched because
    they had not listed their tools yet (`unindexed`). Each doc's `match`
    says in a few words why the search returned it ("exact name",
    "name: screenshot (for picture)", "name: get; ranked up by meaning",
    or, when the search model found it without a word in common, "meaning
    only: no word in common with the query"), so that a weak hit shows as
    one."""

    def __init__(self, docs=(), total=None, truncated=False, unindexed=()):
        super().__init__(docs)
        self.total = len(self) if total is None else total
        self.truncated = bool(truncated)
        self.unindexed = tuple(unindexed or ())


ToolDocs.__module__ = "mcp.runtime"


def search_params(query, limit, detail):
    return {"query": str(query), "limit": _limit(limit), "detail": check_detail(detail)}


def as_tool_docs(res):
    if isinstance(res, dict):
        return ToolDocs(res.get("results") or [], res.get("total"), res.get("truncated"), res.get("unindexed"))
    return ToolDocs(res or [])
