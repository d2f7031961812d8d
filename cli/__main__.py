import sys

from orthotune.cli import main

sys.exit(main())
