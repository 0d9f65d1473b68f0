"""Server-rendered pages of schedweb (Django templates + htmx).

urls: every page route; access: the one login/method/role rule every page wears;
policy_views: the policies list, the playground with its live preview, diff; version_views:
versions, publish, rollback; test_views: test cases; ops_views: sign-in, the dashboard, connect;
decision_views: the sampled decisions; cluster_page: the /cluster/ page;
preview: evaluation results shaped for the playground's fragments (node_rows: its table rows);
completions and markers: the CEL editor's completion schema and its markers; errors: the site's
404 and 500 handlers; gallery: the DEBUG-only component gallery.
"""
