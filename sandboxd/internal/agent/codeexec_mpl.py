"""The agent's matplotlib backend (MPLBACKEND=module://codeexec_mpl).

It draws with Agg, as a headless backend does, and its show() sends every
open figure back with the result and closes them, as a notebook's inline
backend does. codeexec_display imports it through a finder of its own,
since the agent's folder is not on sys.path.
"""

from matplotlib.backend_bases import FigureManagerBase
from matplotlib.backends.backend_agg import FigureCanvasAgg

import codeexec_display

FigureCanvas = FigureCanvasAgg
FigureManager = FigureManagerBase


def show(*args, **kwargs):
    """plt.show(): the open figures go into this call's result."""
    codeexec_display.show_figures()
