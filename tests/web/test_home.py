"""The home page and liveness endpoint answer."""


def test_home_page_renders(client):
    response = client.get("/")
    assert response.status_code == 200
    assert b"schedweb" in response.content


def test_healthz_says_ok(client):
    response = client.get("/healthz")
    assert response.json() == {"status": "ok"}
