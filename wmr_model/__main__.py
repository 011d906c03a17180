"""``python -m wmr_model`` runs the ``wmr`` command line."""

import sys

from wmr_model.cli import main

sys.exit(main())
