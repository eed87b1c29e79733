"""The channel's message types on the agent's side: error codes and the
exceptions they raise."""

import unittest

from agenthost import Agent, FakeHost

# Every error code of docs/PROTOCOL.md and the exception it raises.
CODES = {
    "not_found": "NotFoundError",
    "conflict": "ConflictError",
    "invalid_argument": "InvalidArgumentError",
    "failed_precondition": "FailedPreconditionError",
    "permission_denied": "PermissionDeniedError",
    "unavailable": "UnavailableError",
    "deadline_exceeded": "DeadlineExceededError",
    "internal": "MCPError",
}


class FailingHost(FakeHost):
    """Fails list_servers with the error in its `fail` attribute."""

    fail = None

    def handle(self, m, p):
        if m == "list_servers":
            return False, self.fail
        return super().handle(m, p)


class ErrorCodeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.host = FailingHost()
        cls.a = Agent(cls.host)

    @classmethod
    def tearDownClass(cls):
        cls.a.close()

    def raised(self, fail):
        """What the code sees when list_servers fails with fail."""
        self.host.fail = fail
        r = self.a.exec(
            "try:\n"
            "    await runtime.list_servers()\n"
            "except runtime.MCPError as e:\n"
            "    print(type(e).__name__, type(e).__module__, e.code, isinstance(e, RuntimeError), '|', e)\n")
        self.assertTrue(r.ok, r)
        return r.stdout.rstrip("\n")

    def test_each_code_raises_its_class(self):
        for code, name in CODES.items():
            with self.subTest(code):
                self.assertEqual(self.raised((code, "it failed")), "%s mcp.runtime %s True | it failed" % (name, code))

    def test_classes_are_in_runtime(self):
        r = self.a.exec(
            "import mcp.runtime\n"
            "names = %r\n"
            "print(all(issubclass(getattr(runtime, n), runtime.MCPError) and n in mcp.runtime.__all__ for n in names))\n"
            "print(sorted(getattr(runtime, n).code for n in names))\n" % sorted(set(CODES.values())))
        self.assertEqual(r.stdout, "True\n%s\n" % sorted(CODES), r)

    def test_unknown_code_is_an_mcperror_that_keeps_it(self):
        self.assertEqual(self.raised(("quota_exceeded", "over quota")), "MCPError mcp.runtime quota_exceeded True | over quota")

    def test_missing_message_names_the_method(self):
        self.assertEqual(self.raised(("not_found", "")),
                         "NotFoundError mcp.runtime not_found True | list_servers failed without an error message")

    def test_uncaught_error_names_its_class(self):
        self.host.fail = ("deadline_exceeded", "timed out: no answer within 3s")
        r = self.a.exec("await runtime.list_servers()")
        self.assertEqual(r.error, "DeadlineExceededError: timed out: no answer within 3s", r)
        self.assertTrue(r.stderr.endswith("mcp.runtime.DeadlineExceededError: timed out: no answer within 3s\n"), r)


if __name__ == "__main__":
    unittest.main()
