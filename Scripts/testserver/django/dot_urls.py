"""URLs of the test server: django-oauth-toolkit under /o/, its RFC 8414 metadata also at the
root (/.well-known/oauth-authorization-server/o, as the toolkit recommends for an issuer with a
path), and Django's login page."""
from django.contrib.auth import views as auth_views
from django.urls import include, path
from oauth2_provider import urls as dot_urls

urlpatterns = [
    path("", include((dot_urls.metadata_urlpatterns, "oauth2_metadata"))),
    path("o/", include("oauth2_provider.urls", namespace="oauth2_provider")),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
]
