"""Routes of /api/v1/ (no trailing slashes, like the extender's)."""

from django.urls import path

from policies.numbers import id_converter_register

from . import backtest, canary, cluster, shadow, testcases, views

id_converter_register()


urlpatterns = [
    path("policies", views.PolicyListCreate.as_view()),
    path("policies/<str:name>", views.PolicyDetail.as_view()),
    path("policies/<str:name>/publish", views.PolicyPublish.as_view()),
    path("policies/<str:name>/rollback", views.PolicyRollback.as_view()),
    path("policies/<str:name>/deactivate", views.PolicyDeactivate.as_view()),
    path("policies/<str:name>/shadow", shadow.ShadowReport.as_view()),
    path("policies/<str:name>/canary", canary.CanaryStatus.as_view()),
    path("policies/<str:name>/canary/promote", canary.CanaryPromote.as_view()),
    path("policies/<str:name>/canary/abort", canary.CanaryAbort.as_view()),
    path("policies/<str:name>/shadow/promote", shadow.ShadowPromote.as_view()),
    path("policies/<str:name>/shadow/discard", shadow.ShadowDiscard.as_view()),
    path("policies/<str:name>/versions", views.VersionList.as_view()),
    path("policies/<str:name>/versions/<id:number>", views.VersionDetail.as_view()),
    path("policies/<str:name>/versions/<id:a>/diff/<id:b>", views.VersionDiff.as_view()),
    path("policies/<str:name>/tests", testcases.TestCaseListCreate.as_view()),
    path("policies/<str:name>/tests/run", testcases.TestCaseRun.as_view()),
    path("policies/<str:name>/tests/accept", testcases.TestCasesAccept.as_view()),
    path("policies/<str:name>/tests/<str:case>", testcases.TestCaseDetail.as_view()),
    path("validate", views.Validate.as_view()),
    path("preview", views.Preview.as_view()),
    path("preview/queue", views.QueuePreview.as_view()),
    path("audit", views.AuditList.as_view()),
    path("tokens", views.TokenListCreate.as_view()),
    path("tokens/<id:token_id>", views.TokenRevoke.as_view()),
    path("me", views.Me.as_view()),
    path("decisions", views.DecisionList.as_view()),
    path("decisions/<id:decision_id>", views.DecisionDetail.as_view()),
    path("cluster", cluster.ClusterStatusView.as_view()),
    path("cluster/nodes", cluster.ClusterNodesView.as_view()),
    path("cluster/pods", cluster.ClusterPodsView.as_view()),
    path("backtests", backtest.BacktestStart.as_view()),
    path("backtests/<str:job_id>", backtest.BacktestDetail.as_view()),
]
