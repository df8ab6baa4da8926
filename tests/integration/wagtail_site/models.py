"""Page models with every kind of reference Wagtail indexes: a foreign key, StreamField
blocks, rich text links and embeds, and an inline child model (ParentalKey)."""

from __future__ import annotations

from django.db import models
from modelcluster.fields import ParentalKey
from wagtail import blocks
from wagtail.admin.panels import FieldPanel, InlinePanel
from wagtail.documents.blocks import DocumentChooserBlock
from wagtail.fields import RichTextField, StreamField
from wagtail.images.blocks import ImageChooserBlock
from wagtail.models import Orderable, Page
from wagtail.search import index


class ArticlePage(Page):
    intro = RichTextField(blank=True)
    feed_image = models.ForeignKey(
        "wagtailimages.Image", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    body = StreamField(
        [
            ("paragraph", blocks.RichTextBlock()),
            ("image", ImageChooserBlock()),
            ("document", DocumentChooserBlock()),
            ("page", blocks.PageChooserBlock()),
        ],
        blank=True,
    )

    search_fields = [
        *Page.search_fields,
        index.SearchField("intro"),
        index.SearchField("body"),
    ]
    content_panels = [
        *Page.content_panels,
        FieldPanel("intro"),
        FieldPanel("feed_image"),
        FieldPanel("body"),
        InlinePanel("related_links"),
    ]


class ArticleLink(Orderable):
    page = ParentalKey(ArticlePage, on_delete=models.CASCADE, related_name="related_links")
    document = models.ForeignKey(
        "wagtaildocs.Document", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    label = models.CharField(max_length=100)

    panels = [FieldPanel("label"), FieldPanel("document")]


class PurgedURL(models.Model):
    """One URL purged from the frontend cache by Wagtail's purge task."""

    url = models.CharField(max_length=500)

    def __str__(self) -> str:
        return self.url
