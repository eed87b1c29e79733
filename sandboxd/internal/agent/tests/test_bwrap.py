"""The agent inside a bubblewrap sandbox like the bwrap engine's.

Read-only root with only /usr, uid 65534, no network, the agent folder
mounted read-only at /opt/codeexec, tmpfs /workspace and /tmp.
"""

import os
import shutil
import unittest

from agenthost import AGENT_DIR, Agent

BWRAP = shutil.which("bwrap") or "/usr/bin/bwrap"


def bwrap_argv():
    return [
        BWRAP, "--unshare-all", "--unshare-user", "--die-with-parent", "--new-session",
        "--cap-drop", "ALL", "--uid", "65534", "--gid", "65534",
        "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
        "--symlink", "usr/bin", "/bin", "--symlink", "usr/sbin", "/sbin",
        "--dir", "/etc", "--ro-bind", "/etc/ld.so.cache", "/etc/ld.so.cache",
        "--proc", "/proc", "--dev", "/dev",
        "--ro-bind", AGENT_DIR, "/opt/codeexec",
        "--tmpfs", "/tmp", "--tmpfs", "/workspace", "--remount-ro", "/", "--chdir", "/workspace",
        "/usr/bin/python3", "-I", "/opt/codeexec/agent.py",
    ]


class BwrapTest(unittest.TestCase):
    # scripts/test-environments.sh runs these tests under an environment's
    # Python inside a sandbox, where no further sandbox can be made.
    @unittest.skipIf(os.environ.get("CODEEXEC_AGENT_TESTS_SANDBOXED"), "run inside a sandbox: no nested bwrap")
    def test_agent_in_bwrap(self):
        self.assertTrue(os.path.exists(BWRAP), "this test needs bubblewrap (Debian package bubblewrap)")
        a = Agent(argv=bwrap_argv())
        try:
            r = a.exec(
                "import os, subprocess\n"
                "print(os.getuid(), os.getcwd())\n"
                "open('/workspace/f', 'w').write('x')\n"
                "subprocess.run(['sh', '-c', 'echo child'])\n"
                "def f():\n    return 1\n"
                "print(os.listdir('/opt/codeexec/__pycache__') if os.path.exists('/opt/codeexec/__pycache__') else 'no pycache')\n"
                "import asyncio\nawait asyncio.sleep(0)\n")
            self.assertTrue(r.ok, "%r diag=%r" % (r, a.diag))
            self.assertEqual(r.stdout, "65534 /workspace\nchild\nno pycache\n")
            r = a.exec("print(save_tool(f))\n1/0")
            self.assertEqual(r.stdout, "Tool 'f' saved. It will be available in future sessions.\n")
            self.assertEqual(r.error, "ZeroDivisionError: division by zero")
            self.assertIn('File "<cell-2>", line 2', r.stderr)
        finally:
            a.close()


if __name__ == "__main__":
    unittest.main()
