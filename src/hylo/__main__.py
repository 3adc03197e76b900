import sys

from hylo.cli import main

sys.exit(main())
