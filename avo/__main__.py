import sys

from avo.cli import main

sys.exit(main())
