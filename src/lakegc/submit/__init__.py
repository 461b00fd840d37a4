"""The spark-submit entry point. It lives alone in this folder because spark-submit puts the
script's folder first on sys.path, where sibling modules would shadow others:

    spark-submit "$(python -c 'import lakegc.submit as s; print(s.SCRIPT)')" gc run lakegc://REPO
"""

from pathlib import Path

SCRIPT = str(Path(__file__).with_name("lakegc_submit.py"))
