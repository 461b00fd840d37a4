def test_upload_commit_cat_roundtrip(cli, repo_uri, put):
    put(f"{repo_uri}/main/a.txt", b"hello")
    commit = cli("commit", f"{repo_uri}/main", "-m", "first", "--json").json()
    assert len(commit["parents"]) == 1
    assert cli("fs", "cat", f"{repo_uri}/{commit['id']}/a.txt").stdout == "hello"


def test_process_cli_reports_one_line_error(sh):
    sh("db", "init")
    result = sh("fs", "cat", "lakegc://missing/main/a.txt")
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == ["error: repository 'missing' not found"]
    assert "Traceback" not in result.stderr
