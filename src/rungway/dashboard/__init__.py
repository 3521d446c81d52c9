"""The operator's web page at `/dashboard`: static files that read the admin API.

Nothing here knows the ladder's state: the page fetches it from `/admin/...` in the
browser, so the files served are the same for every gateway and hold no secret.
"""
