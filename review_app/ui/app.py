"""Entry script: page setup, sign-in, routing. Pages live in ``views/``.

Not ``pages/``: Streamlit discovers a folder of that name by itself, and a deep link as
the first request of a fresh server would run the page without this script.
"""

from __future__ import annotations

import logging

import streamlit as st

from review_app.errors import DatabaseBusy, InputError, PermissionDenied
from review_app.services.access.actors import one_role_read
from review_app.services.operations.page_run import one_token_read
from review_app.services.reports.report_store import page_budget
from review_app.ui import auth, registry, session
from review_app.ui.keys import panel
from review_app.ui.safe import code_span, error_text, escape

# An emoji favicon is drawn in the browser; a Material icon would be fetched from
# fonts.gstatic.com, a request leaving the reviewer's machine on every page load.
st.set_page_config(page_title="Role Review", page_icon="⚖️", layout="wide")
session.init_session()

# Every run reads the signed-in person's role once (every service still checks it), and
# each part of the reports' data tokens once (a commit of the run's own reads it again);
# it computes reports at once for at most REVIEW_APP_REPORT_PAGE_SECONDS in all, and shows
# the others' last figures while jobs compute them (report_store.page_budget).
with one_role_read(), one_token_read(), page_budget():
    try:
        signed_in = auth.current_actor()
    except (PermissionDenied, InputError) as error:  # a deactivated person, a name refused
        st.error(error_text(error))
        st.stop()

    if signed_in is None:
        st.title("Role Review")
        if auth.auth_mode() == "oidc":
            st.write("Sign in to review conversations.")
            if st.button("Sign in", key="sign_in", type="primary"):
                st.login()
        else:
            st.error(
                f"No identity: this server trusts the {escape(auth.proxy_header_name())} header "
                "of its reverse proxy, and the request had none, or one that is no name a "
                "person may sign in with. Open the app through the proxy."
            )
        st.stop()

    st.session_state["_actor"] = signed_in
    # Only the pages this person can use: a reviewer's sidebar lists queue, review and
    # rubrics (the role is read again on each run, so a promotion shows at once).
    navigation = st.navigation(registry.pages_for(signed_in))
    if navigation.url_path in ("review", "queue", ""):  # "": the root shows the queue
        # First on the page: label keys pressed while the review page loads (or right
        # after N on the queue) are kept.
        panel.early_keys()

    with st.sidebar:
        if signed_in.auth_mode == "local":
            st.info(
                f"Local single-user mode: no sign-in; you are {code_span(signed_in.name)} "
                f"({escape(signed_in.role.replace('_', ' '))}).",
                icon=":material/person:",
            )
        else:
            st.caption(f"Signed in as {code_span(signed_in.label)} · {escape(signed_in.role)}")
            if signed_in.auth_mode == "oidc" and st.button("Sign out", key="sign_out"):
                st.logout()

    session.show_flash()
    try:
        navigation.run()
    except DatabaseBusy as error:
        # Pages that can keep the user's work (review, adjudicate) catch this first;
        # anywhere else the page stops with the reason instead of a blank error.
        st.error(error_text(error), icon=":material/hourglass_top:")
    except Exception:
        # Anything else: the traceback (server paths, code, values) goes to the server's
        # log, never to the page ("--client.showErrorDetails none" is the second guard).
        logging.getLogger("review_app.ui").exception("page %r failed", navigation.url_path)
        st.error(
            "Something went wrong on the server; nothing more is shown here. The server's "
            "log has the details.",
            icon=":material/error:",
        )
