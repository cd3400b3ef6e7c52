import sys

from txcl.cli.main import main

sys.exit(main())
