"""Routes of every server-rendered page; included at the site root.

/                                            dashboard (and /dashboard/health, its polled card)
/login/ /logout/                             sign-in and sign-out
/decisions/[<id>/]                           sampled extender decisions and one's breakdown
/account/tokens/                             the user's API tokens: create, list, revoke
/connect/                                    kube-scheduler configuration for this installation
/connect/scheduler-profile                    POST: the configuration previews model (admin)
/cluster/                                    nodes and pods as the engine sees them
/help/policies/[?policy=]                     the language reference (docs/policies.md)
/policies/                                   list (GET), create (POST)
/policies/import                             a policy file: new policy or draft replaced (POST)
/policies/<name>/download                    the draft with its test cases as one YAML file
/policies/<name>/                            playground
/policies/<name>/preview                     live preview fragment (POST)
/policies/<name>/pods?q=                     pod search for the playground's picker (fragment)
/policies/<name>/node-edit                   the node editor's form and its what-if edits (POST)
/policies/<name>/share                       a share link of the playground's state (POST)
/s/<token>/                                  a share link: opens its state in the playground
/policies/<name>/draft                       save the draft with If-Match (POST)
/policies/<name>/preview-all[/<job>]         background preview of all pending pods
/policies/<name>/tests/[add|run|delete]      test cases
/policies/<name>/tests/[expect|review|accept] edit an expectation; review and accept new results
/policies/<name>/versions/                   history, publish, rollback, deactivate
/policies/<name>/backtest[/<job>]            backtest: recent decisions' pods and pending pods, now
/policies/<name>/shadow/[promote|discard]    the shadow version's report; promote, discard (POST)
/policies/<name>/canary/promote|abort        the canary to 100%, or back to stable (POST)
/policies/<name>/diff/?a=&b=                 the diff pickers: on to the canonical diff URL
/policies/<name>/versions/<a>/diff/<b>       side-by-side diff (a, b: a number or draft)
/_dev/components/[preview]                   the component gallery (404 unless DEBUG)
"""

from django.urls import path

from policies.numbers import id_converter_register

from . import (
    backtest_views,
    canary_views,
    cluster_page,
    decision_views,
    gallery,
    node_editor,
    ops_views,
    preview_all_views,
    reference,
    shadow_views,
    share_views,
    test_expect_views,
    test_views,
    token_page,
    transfer_views,
    version_views,
)
from . import policy_views as views

id_converter_register()

urlpatterns = [
    path("", ops_views.dashboard, name="home"),
    path("dashboard/health", ops_views.dashboard_health, name="dashboard-health"),
    path("login/", ops_views.SignInView.as_view(), name="login"),
    path("logout/", ops_views.SignOutView.as_view(), name="logout"),
    path("decisions/", decision_views.decision_list, name="decisions"),
    path("decisions/<id:decision_id>/", decision_views.decision_detail, name="decision"),
    path("account/tokens/", token_page.tokens_page, name="account-tokens"),
    path("connect/", ops_views.connect, name="connect"),
    path(
        "connect/scheduler-profile",
        ops_views.connect_scheduler_profile,
        name="connect-scheduler-profile",
    ),
    path("cluster/", cluster_page.cluster_page, name="cluster"),
    path("help/policies/", reference.reference_page, name="help-policies"),
    path("policies/", views.policy_list, name="policy-list"),
    path("policies/import", transfer_views.policy_upload, name="policy-import"),
    path("policies/<slug:name>/", views.playground, name="policy-playground"),
    path("policies/<slug:name>/preview", views.preview, name="policy-preview"),
    path("policies/<slug:name>/pods", views.pod_search, name="policy-pod-search"),
    path("policies/<slug:name>/download", transfer_views.policy_download, name="policy-download"),
    path("policies/<slug:name>/node-edit", node_editor.node_edit, name="policy-node-edit"),
    path("policies/<slug:name>/share", share_views.share_create, name="policy-share"),
    path("s/<str:token>/", share_views.share_open, name="share-open"),
    path("policies/<slug:name>/draft", views.draft_save, name="policy-draft-save"),
    path(
        "policies/<slug:name>/preview-all",
        preview_all_views.preview_all_start,
        name="policy-preview-all",
    ),
    path(
        "policies/<slug:name>/preview-all/<uuid:job_id>",
        preview_all_views.preview_all_status,
        name="policy-preview-all-status",
    ),
    path("policies/<slug:name>/tests/", test_views.tests_page, name="policy-tests"),
    path("policies/<slug:name>/tests/add", test_views.test_add, name="policy-test-add"),
    path("policies/<slug:name>/tests/run", test_views.tests_run, name="policy-tests-run"),
    path("policies/<slug:name>/tests/delete", test_views.test_delete, name="policy-test-delete"),
    path(
        "policies/<slug:name>/tests/expect",
        test_expect_views.test_expect_save,
        name="policy-test-expect",
    ),
    path(
        "policies/<slug:name>/tests/review",
        test_expect_views.tests_review,
        name="policy-tests-review",
    ),
    path(
        "policies/<slug:name>/tests/accept",
        test_expect_views.tests_accept,
        name="policy-tests-accept",
    ),
    path("policies/<slug:name>/versions/", version_views.versions_page, name="policy-versions"),
    path("policies/<slug:name>/backtest", backtest_views.backtest_start, name="policy-backtest"),
    path(
        "policies/<slug:name>/backtest/<uuid:job_id>",
        backtest_views.backtest_status,
        name="policy-backtest-status",
    ),
    path("policies/<slug:name>/publish", version_views.publish, name="policy-publish"),
    path("policies/<slug:name>/rollback", version_views.rollback, name="policy-rollback"),
    path("policies/<slug:name>/deactivate", version_views.deactivate, name="policy-deactivate"),
    path("policies/<slug:name>/delete", version_views.policy_delete, name="policy-delete"),
    path("policies/<slug:name>/shadow/", shadow_views.shadow_page, name="policy-shadow"),
    path(
        "policies/<slug:name>/canary/promote",
        canary_views.canary_promote,
        name="policy-canary-promote",
    ),
    path(
        "policies/<slug:name>/canary/abort", canary_views.canary_abort, name="policy-canary-abort"
    ),
    path(
        "policies/<slug:name>/shadow/promote",
        shadow_views.shadow_promote,
        name="policy-shadow-promote",
    ),
    path(
        "policies/<slug:name>/shadow/discard",
        shadow_views.shadow_discard,
        name="policy-shadow-discard",
    ),
    # with a trailing slash like versions/ and tests/; without one too (the old address)
    path("policies/<slug:name>/diff/", views.diff_pick, name="policy-diff-pick"),
    path("policies/<slug:name>/diff", views.diff_pick),
    path(
        "policies/<slug:name>/versions/<str:a>/diff/<str:b>",
        views.diff_page,
        name="policy-diff",
    ),
    # Component gallery for developers and browser tests; the views answer 404 unless DEBUG.
    path("_dev/components/", gallery.components, name="dev-components"),
    path("_dev/components/preview", gallery.components_preview, name="dev-components-preview"),
]
